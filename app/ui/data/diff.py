"""Two decisions side by side: candidates aligned by instance, what differs flagged.

Pure: two :class:`schemas.trace.DecisionTrace` in, frames out. The second trace is another
request or the same request re-decided under another policy (:func:`replay_file`, :func:`replay_yaml`),
read as ``routelens replay --policy`` reads it (:func:`app.experiments.policy_file.load_replay_policy`):
a whole ``routelens.yaml``, a routing policy (``policies/seed000.yaml``) or a policy file of sections,
the last two on top of the configuration the app runs with.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd

from app.explain import CHAIN_ONLY, DASH, ordered_candidates, unjudged, violation_short
from app.ui.data.why_not import reason_for
from schemas.errors import ConfigError
from schemas.trace import CandidateEval, DecisionTrace

__all__ = ["CANDIDATE_DIFF_COLUMNS", "TERM_DIFF_COLUMNS", "align", "facts_diff", "policy_path", "read_policy",
           "replay_file", "replay_yaml", "terms_diff"]

CANDIDATE_DIFF_COLUMNS: tuple[str, ...] = (
    "instance", "verdict_a", "verdict_b", "rank_a", "rank_b", "total_a", "total_b", "delta", "why_a", "why_b",
    "differs",
)
TERM_DIFF_COLUMNS: tuple[str, ...] = ("instance", "term", "raw_a", "raw_b", "weighted_a", "weighted_b", "differs")
_EPS = 1e-9
MAX_POLICY_BYTES = 1 << 20
POLICY_SUFFIXES = (".yaml", ".yml", ".json", ".dsl")


def _instances(a: DecisionTrace, b: DecisionTrace) -> list[str]:
    """Instances of ``a`` best first, then those only ``b`` has (best first)."""
    names = [c.instance for c in ordered_candidates(a.candidates)]
    return names + [c.instance for c in ordered_candidates(b.candidates) if c.instance not in names]


def _verdict(trace: DecisionTrace, cand: CandidateEval | None, aside: list[str]) -> str:
    if cand is None:
        return "absent"
    if cand.instance == trace.selected_instance:
        return "selected"
    if cand.instance in aside:  # a rule's chain, kept for failed attempts: neither filtered nor scored
        return CHAIN_ONLY
    return "feasible" if cand.feasible else "ruled out"


def _rank(cand: CandidateEval | None, aside: list[str]) -> int | None:
    """The rank the picker gave; none for a chain candidate listed after the ranked ones (never scored)."""
    return None if cand is None or cand.instance in aside else cand.rank


def _why(trace: DecisionTrace, instance: str, model: str | None) -> str:
    reason = reason_for(trace, instance, model)
    return "" if reason is None else reason.text


def _close(x: float | None, y: float | None) -> bool:
    return (x is None and y is None) or (x is not None and y is not None and abs(x - y) < _EPS)


def align(a: DecisionTrace, b: DecisionTrace) -> pd.DataFrame:
    """One row per instance in either trace: verdict, rank, total, and why it was not chosen on each side.

    The verdict is ``selected``, ``feasible``, ``ruled out``, ``absent``, or :data:`app.explain.CHAIN_ONLY`
    for a rule's chain kept unjudged (:func:`app.explain.unjudged`): without a rank, as "Why this
    model" and ``routelens trace`` show it.

    ``why_a``/``why_b`` is the one reason it was not chosen (:mod:`app.ui.data.why_not`), for an
    instance absent from a side too ("left out by rule X's target"); empty for the chosen one.
    ``differs`` is True when the verdict, the rank, the total or the violations differ.
    """
    ca, cb = {c.instance: c for c in a.candidates}, {c.instance: c for c in b.candidates}
    aside_a, aside_b = unjudged(a), unjudged(b)
    rows = []
    for name in _instances(a, b):
        x, y = ca.get(name), cb.get(name)
        seen = x or y
        model = seen.model if seen is not None else None
        ta, tb = (x.total if x else None), (y.total if y else None)
        viol_a = "; ".join(violation_short(v) for v in x.violations) if x else ""
        viol_b = "; ".join(violation_short(v) for v in y.violations) if y else ""
        va, vb = _verdict(a, x, aside_a), _verdict(b, y, aside_b)
        ra, rb = _rank(x, aside_a), _rank(y, aside_b)
        rows.append({
            "instance": name, "verdict_a": va, "verdict_b": vb, "rank_a": ra, "rank_b": rb, "total_a": ta,
            "total_b": tb, "delta": None if ta is None or tb is None else tb - ta, "why_a": _why(a, name, model),
            "why_b": _why(b, name, model), "differs": va != vb or ra != rb or not _close(ta, tb) or viol_a != viol_b,
        })
    frame = pd.DataFrame(rows, columns=list(CANDIDATE_DIFF_COLUMNS))
    frame[["rank_a", "rank_b"]] = frame[["rank_a", "rank_b"]].astype("Int64")
    return frame.astype({"total_a": "float64", "total_b": "float64", "delta": "float64", "differs": "bool"})


def terms_diff(a: DecisionTrace, b: DecisionTrace) -> pd.DataFrame:
    """One row per (instance, term) scored on either side; ``differs`` when the weighted values differ."""
    def terms(t: DecisionTrace) -> dict[tuple[str, str], tuple[float, float]]:
        return {(c.instance, n): (raw, w) for c in t.candidates for n, raw, _, w in t.terms_of(c)}

    ta, tb = terms(a), terms(b)
    order = {name: i for i, name in enumerate(_instances(a, b))}
    keys = sorted(set(ta) | set(tb), key=lambda k: (order.get(k[0], len(order)), k[1]))
    rows = []
    for inst, term in keys:
        (raw_a, w_a), (raw_b, w_b) = ta.get((inst, term), (None, None)), tb.get((inst, term), (None, None))
        rows.append({"instance": inst, "term": term, "raw_a": raw_a, "raw_b": raw_b, "weighted_a": w_a,
                     "weighted_b": w_b, "differs": not _close(w_a, w_b) or not _close(raw_a, raw_b)})
    return pd.DataFrame(rows, columns=list(TERM_DIFF_COLUMNS)).astype(
        {"raw_a": "float64", "raw_b": "float64", "weighted_a": "float64", "weighted_b": "float64", "differs": "bool"})


def facts_diff(a: DecisionTrace, b: DecisionTrace) -> pd.DataFrame:
    """The headline facts of both decisions (selection, rule, policy, outcome...), ``differs`` per field."""
    def facts(t: DecisionTrace) -> dict[str, str]:
        weights = ", ".join(f"{w.name} {w.weight:g}" for w in t.score_weights) or DASH
        return {"request_id": t.request_id, "selected": f"{t.selected_model or DASH} / {t.selected_instance or DASH}",
                "rule": t.rule or DASH, "intent": t.intent or DASH, "weights": weights,
                "policy_hash": t.policy_hash, "router_version": t.router_version, "mode": t.mode.value,
                "fallback": "yes" if t.fallback_triggered else "no",
                "outcome": f"{t.outcome.status.value} · HTTP {t.outcome.http_status}"}

    fa, fb = facts(a), facts(b)
    return pd.DataFrame([{"field": k, "a": fa[k], "b": fb[k], "differs": fa[k] != fb[k]} for k in fa])


def replay_file(trace: DecisionTrace, path: str | Path, base: str | Path | None) -> DecisionTrace:
    """Re-decide ``trace`` under the policy in file ``path``, as ``routelens replay --policy`` would.

    Args:
        trace: The decision to replay.
        path: A whole ``routelens.yaml``, a routing policy or a policy file of sections.
        base: The configuration a routing policy or sections go into (the app's ``routelens.yaml``).

    Raises:
        ConfigError: Either file is invalid (the message names file, line and field).
        RoutelensError: The trace cannot be re-decided under it (e.g. its rule is not in the policy).
    """
    from app.experiments.policy_file import load_replay_policy
    from router_core import replay

    return replay(trace, load_replay_policy(path, base)).trace


def replay_yaml(trace: DecisionTrace, text: str, source: str = "<uploaded policy>",
                base: str | Path | None = None) -> DecisionTrace:
    """Re-decide ``trace`` under the policy written in ``text`` (an uploaded file named ``source``).

    Read like a file (:func:`replay_file`): a whole configuration, a routing policy or sections on
    top of ``base``. A relative path it names is taken from ``base``'s folder.

    Raises:
        ConfigError: The text is not a valid policy (the message names ``source``, line and field).
    """
    name = Path(source).name
    name = name if Path(name).suffix.lower() in POLICY_SUFFIXES else "uploaded-policy.yaml"
    with tempfile.TemporaryDirectory(prefix="routelens-policy-") as folder:
        path = Path(folder) / name
        path.write_text(text, encoding="utf-8")
        try:
            return replay_file(trace, path, base)
        except ConfigError as exc:
            raise ConfigError(source, exc.problems) from exc


def policy_path(path: str, config: str | Path | None) -> Path:
    """The policy file an operator named: a relative ``path`` is taken from ``config``'s folder.

    ``routelens replay`` runs where its ``routelens.yaml`` is; the app may not, so a path such as
    ``policies/seed000.yaml`` resolves next to the configuration, else in the working folder.

    Raises:
        ValueError: Not a policy file name, missing, unreadable, or over 1 MB (:func:`read_policy`).
    """
    if len(path) > 4096 or "\x00" in path:
        raise ValueError("not a usable file path")
    p = Path(path).expanduser()
    if not p.is_absolute() and config is not None:
        p = Path(config).resolve().parent / p
    read_policy(str(p))
    return p


def read_policy(path: str) -> str:
    """The text of a policy file named by the operator (a ``routelens.yaml``, a routing policy...).

    Raises:
        ValueError: Not a ``.yaml``/``.yml``/``.json``/``.dsl`` file, missing, unreadable, or over 1 MB.
    """
    if len(path) > 4096 or "\x00" in path:
        raise ValueError("not a usable file path")
    p = Path(path).expanduser()
    if p.suffix.lower() not in POLICY_SUFFIXES:
        raise ValueError(f"a policy file ends in {', '.join(POLICY_SUFFIXES)}")
    try:
        if not p.is_file():
            raise ValueError(f"no policy file at {path}")
        if p.stat().st_size > MAX_POLICY_BYTES:
            raise ValueError("the policy file is over 1 MB")
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
