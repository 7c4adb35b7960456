"""Reference prompts of the semantic probe, and calibrating their thresholds.

A references file is a YAML list; each item has ``id``, ``lang`` (``zh`` or ``en``), ``prompt``,
``answer`` (the reference answer) and optionally ``threshold`` (else
``probes.semantic.threshold``). The packaged default is ``probes/references.yaml``. Compare like
with like: the answer is in the prompt's language (MiniLM scores a zh/en pair near 0.05).

:func:`calibrate` turns similarities measured on healthy (and, if given, drifted) instances into
a suggested threshold per reference: with drifted samples the midpoint between the healthy 1st
percentile and the drifted 99th; without them the healthy mean minus 4 standard deviations, and
at least 0.05 below the healthy minimum. ``separation`` is healthy p1 minus drifted p99 (> 0: they separate).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import Field, TypeAdapter, ValidationError

from probes.latency import percentile
from schemas.common import ContractModel
from schemas.errors import ConfigError
from schemas.yamlconf import UniqueKeyLoader, field_name, locate

__all__ = ["DEFAULT_REFERENCES", "Calibration", "Reference", "calibrate", "dump_references", "load_references"]

DEFAULT_REFERENCES = Path(__file__).resolve().parent / "references.yaml"


class Reference(ContractModel):
    """One reference prompt and the answer a faithful instance gives (in the same language)."""

    id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    lang: Literal["zh", "en"]
    prompt: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    threshold: float | None = Field(None, ge=-1, le=1, description="Own threshold (calibrated); else the default.")


_LIST = TypeAdapter(list[Reference])


def load_references(path: str | Path | None = None) -> list[Reference]:
    """Load a references file (the packaged default when ``path`` is None).

    Raises:
        ConfigError: Unreadable file, YAML error, a bad field (with its line) or duplicate ids.
    """
    source = Path(path) if path is not None else DEFAULT_REFERENCES
    try:
        text = source.read_text(encoding="utf-8")
        data = yaml.load(text, Loader=UniqueKeyLoader)  # a key given twice is an error, not the last one kept
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(str(source), [(None, "<file>", f"cannot read references: {exc}")]) from exc
    try:
        refs = _LIST.validate_python(data)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            loc = tuple(p for p in e["loc"] if isinstance(p, (int, str)))
            problems.append((locate(text, loc), field_name(loc) or "<root>", e["msg"]))
        raise ConfigError(str(source), problems) from exc
    ids = [r.id for r in refs]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes or not refs:
        problem = f"duplicate reference ids: {dupes}" if dupes else "no references"
        raise ConfigError(str(source), [(None, "id", problem)])
    return refs


def dump_references(refs: Sequence[Reference], header: str = "") -> str:
    """The YAML text of ``refs`` (what ``routelens probes calibrate --write`` writes)."""
    body = yaml.safe_dump([r.model_dump(exclude_none=True) for r in refs], allow_unicode=True, sort_keys=False,
                          width=1000)
    return "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines()) + body


@dataclass(frozen=True, slots=True)
class Calibration:
    """Healthy (and drifted) similarity distribution of one reference, and the threshold it suggests."""

    reference: str
    healthy_n: int
    healthy_mean: float
    healthy_std: float
    healthy_min: float
    healthy_p1: float
    drifted_n: int
    drifted_max: float | None
    drifted_p99: float | None
    suggested: float
    separation: float | None


def calibrate(healthy: Mapping[str, Sequence[float]],
              drifted: Mapping[str, Sequence[float]] | None = None) -> list[Calibration]:
    """Suggest a threshold per reference from its measured similarities (see the module docstring)."""
    out = []
    for ref, values in healthy.items():
        if not values:
            continue
        mean = statistics.fmean(values)
        std = statistics.pstdev(values) if len(values) > 1 else 0.0
        p1 = percentile(values, 1)
        bad = list((drifted or {}).get(ref, ()))
        if bad:
            p99 = percentile(bad, 99)
            suggested, separation = (p1 + p99) / 2, p1 - p99
        else:
            p99, separation = None, None
            suggested = min(mean - 4 * std, min(values) - 0.05)
        out.append(Calibration(ref, len(values), mean, std, min(values), p1, len(bad), max(bad) if bad else None, p99,
                               round(max(-1.0, min(1.0, suggested)), 3), separation))
    return out
