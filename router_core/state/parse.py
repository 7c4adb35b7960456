"""Engine ``/metrics`` bodies to the few gauges routing needs, with prometheus-client's parser.

Engines understood:

- vLLM: ``vllm:num_requests_waiting``, ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``
  (its legacy ``vllm:gpu_cache_usage_perc`` only when the current one is absent), and
  ``vllm:cache_config_info`` (``num_gpu_blocks``, ``block_size`` labels) when present.
- SGLang: ``sglang:num_queue_reqs``, ``sglang:num_running_reqs``, ``sglang:token_usage``.
- Text Generation Inference: ``tgi_queue_size`` (queue), ``tgi_batch_current_size`` (running) and
  the ``tgi_request_duration`` histogram (end to end). TGI exposes no KV-cache share, so
  ``kv_cache_usage`` stays None (``tgi_batch_current_max_tokens`` is a token budget, not a share).
- llama.cpp's server (``llama-server --metrics``): ``llamacpp:requests_deferred`` (queue),
  ``llamacpp:requests_processing`` (running) and, from builds that still export it,
  ``llamacpp:kv_cache_usage_ratio`` (0-1); newer builds dropped it, and then ``kv_cache_usage``
  stays None ("not reported", as for TGI). It exports no latency histograms.
- Any engine: ``process_start_time_seconds`` (prometheus_client exports it by default; vLLM has
  it, TGI and SGLang do not), from which the view derives warm-up where no warm-up gauge is
  exported (:mod:`router_core.state.warmup`). It is no routing gauge: alone it is ``no_gauges``.

Several label sets (several engines in one server) are summed for counts and maxed for cache use.

Hostile bodies are contained here, never passed on. Every failure raises :class:`MetricsParseError`
whose ``reason`` is one of :data:`REASONS` (the scraper's bounded label vocabulary). Gauges out of
their physical range are decided per gauge, and each decision is listed in
:attr:`EngineGauges.adjustments`:

- a body that is not UTF-8 is refused whole (``decode``), as Prometheus itself refuses it;
- counts (queue, running): a negative, NaN or infinite sample, or a sum above :data:`MAX_COUNT`,
  is *refused*: the gauge becomes None, which routing treats as saturated. Never clamped to 0: a
  clamped count would look idle and win traffic;
- KV-cache usage: NaN or infinite is refused; within :data:`KV_TOLERANCE` of [0, 1] (rounding in
  the engine) it is *clamped* to [0, 1]; further out it is refused;
- warm-up progress: NaN or infinite is refused, anything else clamped to [0, 1];
- process start time: NaN, infinite or not positive is refused; of several, the newest counts
  (the most recent restart);
- a scrape whose every routing gauge (queue, running, KV) was refused is refused whole
  (``out_of_range``): there is nothing left to route on.

Only the families routing reads are parsed (:func:`routing_lines`): a real vLLM body is 13-50 kB,
most of it histograms and process metrics nobody here reads, and prometheus-client's parser walks
each character in Python (2 ms for the 13 kB vLLM body of ``tests/contracts``, 0.7 ms for its
routing lines). The gateway parses every instance every ``scrape.interval_s`` on its event loop,
so at 200 instances that is the difference between 0.4 and 0.14 s of CPU a second. A body whose
routing lines are fine is taken even when a line of another family is malformed (that family is
not read); a body without any routing gauge is parsed whole, so it fails for the same reason as
before (``parse`` for garbage, ``no_gauges`` for metrics of something else).
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

from prometheus_client.parser import text_fd_to_metric_families, text_string_to_metric_families

from router_core.state.histogram import Buckets

__all__ = [
    "KV_TOLERANCE", "MAX_COUNT", "REASONS", "EngineGauges", "MetricsParseError", "decode_metrics",
    "parse_engine_metrics", "routing_lines",
]

REASONS = ("decode", "parse", "no_gauges", "out_of_range")
MAX_COUNT = 1e6  # requests queued or running on one server; beyond this a count is nonsense
KV_TOLERANCE = 0.01

_QUEUE = ("vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size", "llamacpp:requests_deferred")
_RUNNING = ("vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
            "llamacpp:requests_processing")
_KV = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage", "llamacpp:kv_cache_usage_ratio")
_WARMUP = ("routelens_sim_warmup_progress",)
_START = "process_start_time_seconds"
_TTFT = ("vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds")
_E2E = ("vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "tgi_request_duration")
_CACHE_INFO = ("vllm:cache_config_info", "vllm:cache_config")  # the parser drops "_info" of an info type
_FAMILIES = _QUEUE + _RUNNING + _KV + _WARMUP + _TTFT + _E2E + _CACHE_INFO + (_START,)
# A line is kept when it starts with one of these: a sample of a family read here (a histogram's
# _bucket/_sum/_count included), or its HELP or TYPE line (the parser needs TYPE to group buckets).
_PREFIXES = _FAMILIES + tuple(f"# {kind} {name}" for kind in ("HELP", "TYPE") for name in _FAMILIES)


class MetricsParseError(ValueError):
    """The body is not usable; ``reason`` is one of :data:`REASONS`; ``line``: the body's line at fault, if known."""

    def __init__(self, message: str, reason: str = "parse", line: int | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.line = line


class _CountedLines(io.StringIO):
    """The text's lines, as prometheus-client's parser reads them (``for line in fd``), counted."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.read_lines = 0

    def __next__(self) -> str:  # type: ignore[override]  # typeshed: _IOBase.__next__ is bytes
        line = super().__next__()
        self.read_lines += 1
        return line


def _line_at_fault(text: str) -> int | None:
    """The line of ``text`` prometheus-client's parser fails at (None: it does not; the failure was a value read here).

    Only after a failure: ``text`` is read again, its lines counted (counting every scrape would cost each one).
    """
    lines = _CountedLines(text)
    try:
        for _ in text_fd_to_metric_families(lines):
            pass
    except Exception:  # the parser raises several types on hostile input
        return lines.read_lines
    return None


@dataclass(frozen=True, slots=True)
class EngineGauges:
    """Normalised state of one engine scrape; None where the engine does not say (or was refused).

    ``adjustments`` lists each out-of-range gauge and what was done, e.g.
    ``"queue=-5 refused (negative)"`` or ``"kv_cache_usage=1.004 clamped to 1"``.
    """

    engine: str | None
    queue: float | None
    running: float | None
    kv_cache_usage: float | None
    warmup_progress: float | None
    ttft_buckets: Buckets | None = None
    e2e_buckets: Buckets | None = None
    num_gpu_blocks: int | None = None
    block_size: int | None = None
    adjustments: tuple[str, ...] = ()
    process_start_s: float | None = None  # Unix seconds (process_start_time_seconds)

    @property
    def has_refused(self) -> bool:
        """Whether some gauge was refused (not merely clamped)."""
        return any(" refused" in a for a in self.adjustments)


def decode_metrics(body: bytes) -> str:
    """Decode a ``/metrics`` body, which the exposition format requires to be UTF-8.

    Raises:
        MetricsParseError: ``reason="decode"`` when it is not UTF-8.
    """
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MetricsParseError(f"body is not UTF-8 (byte {exc.start} of {len(body)})", "decode") from exc


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _count(name: str, samples: list[float] | None, notes: list[str]) -> float | None:
    if not samples:
        return None
    bad = next((v for v in samples if not math.isfinite(v) or v < 0), None)
    if bad is not None:
        notes.append(f"{name}={_fmt(bad)} refused ({'negative' if bad < 0 else 'not finite'})")
        return None
    total = sum(samples)  # not math.fsum: it raises OverflowError where sum gives inf
    if not math.isfinite(total) or total > MAX_COUNT:
        notes.append(f"{name}={_fmt(total)} refused (above {_fmt(MAX_COUNT)})")
        return None
    return total


def _share(name: str, samples: list[float] | None, notes: list[str], tolerance: float) -> float | None:
    if not samples:
        return None
    value = max(samples, key=lambda v: math.inf if math.isnan(v) else v)
    if not math.isfinite(value):
        notes.append(f"{name}={_fmt(value)} refused (not finite)")
        return None
    if -tolerance <= value <= 1 + tolerance:
        clamped = min(max(value, 0.0), 1.0)
        if clamped != value:
            notes.append(f"{name}={_fmt(value)} clamped to {_fmt(clamped)}")
        return clamped
    notes.append(f"{name}={_fmt(value)} refused (outside 0-1)")
    return None


def _first(values: dict[str, list[float]], names: tuple[str, ...]) -> list[float] | None:
    return next((values[n] for n in names if values.get(n)), None)


def _int_label(labels: dict[str, str], key: str) -> int | None:
    try:
        number = int(labels.get(key, ""))
    except ValueError:
        return None  # "None" (vLLM's spelling of unset) or absent
    return number if number >= 0 else None


def routing_lines(text: str) -> str:
    """The lines of ``text`` that belong to a family routing reads (samples, HELP and TYPE), in order."""
    return "\n".join([line for line in text.split("\n") if line.startswith(_PREFIXES)])


def parse_engine_metrics(body: str | bytes) -> EngineGauges:
    """Parse one scrape (bytes are decoded as UTF-8 first).

    Only the routing families' lines are parsed (:func:`routing_lines`); when they hold no gauge,
    the whole body is, so that the failure's reason is the one the whole body earns.

    Raises:
        MetricsParseError: When the body is not UTF-8, does not parse, has none of the known
            gauges, or has only out-of-range ones; ``reason`` says which.
    """
    text = decode_metrics(body) if isinstance(body, bytes) else body
    try:
        return _parse(routing_lines(text))
    except MetricsParseError as exc:
        if exc.reason == "out_of_range":
            raise
    return _parse(text)  # no usable gauge among the routing lines: the whole body says why


def _parse(text: str) -> EngineGauges:
    wanted = set(_QUEUE + _RUNNING + _KV + _WARMUP)
    histograms = set(_TTFT + _E2E)
    values: dict[str, list[float]] = {}
    buckets: dict[str, dict[float, float]] = {}
    cache: dict[str, str] = {}
    starts: list[float] = []
    try:
        for family in text_string_to_metric_families(text):
            if family.name in histograms:
                per_le = buckets.setdefault(family.name, {})
                for sample in family.samples:
                    if sample.name.endswith("_bucket") and "le" in sample.labels:
                        le = float(sample.labels["le"])
                        per_le[le] = per_le.get(le, 0.0) + float(sample.value)
            elif family.name in _CACHE_INFO:
                cache = next((dict(s.labels) for s in family.samples), cache)
            elif family.name == _START:
                starts += [float(s.value) for s in family.samples if s.name == _START]
            elif family.name in wanted:
                for sample in family.samples:
                    if sample.name == family.name:
                        values.setdefault(family.name, []).append(float(sample.value))
    except Exception as exc:  # the parser raises several types on hostile input; all mean "unparseable"
        line = _line_at_fault(text)
        where = "" if line is None else f" at line {line}"
        raise MetricsParseError(f"unparseable metrics{where}: {type(exc).__name__}: {exc}"[:200], "parse",
                                line) from exc
    if not values:
        raise MetricsParseError("no vLLM, SGLang, TGI or llama.cpp gauges found", "no_gauges")
    notes: list[str] = []
    queue = _count("queue", _first(values, _QUEUE), notes)
    running = _count("running", _first(values, _RUNNING), notes)
    kv = _share("kv_cache_usage", _first(values, _KV), notes, KV_TOLERANCE)
    warmup = _share("warmup_progress", _first(values, _WARMUP), notes, math.inf)
    started = _start_time(starts, notes)
    routing_present = any(_first(values, names) for names in (_QUEUE, _RUNNING, _KV))
    if routing_present and queue is None and running is None and kv is None:
        raise MetricsParseError("every gauge out of range: " + "; ".join(notes), "out_of_range")
    return EngineGauges(
        engine=_engine(values),
        queue=queue,
        running=running,
        kv_cache_usage=kv,
        warmup_progress=warmup,
        ttft_buckets=_buckets(buckets, _TTFT),
        e2e_buckets=_buckets(buckets, _E2E),
        num_gpu_blocks=_int_label(cache, "num_gpu_blocks"),
        block_size=_int_label(cache, "block_size"),
        adjustments=tuple(notes),
        process_start_s=started,
    )


def _start_time(samples: list[float], notes: list[str]) -> float | None:
    if not samples:
        return None
    value = max(samples, key=lambda v: math.inf if math.isnan(v) else v)
    if not math.isfinite(value) or value <= 0:
        why = "not finite" if not math.isfinite(value) else "not positive"
        notes.append(f"process_start_time={_fmt(value)} refused ({why})")
        return None
    return value


def _engine(values: dict[str, list[float]]) -> str:
    if any(n.startswith("sglang:") for n in values):
        return "sglang"
    if any(n.startswith("tgi_") for n in values):
        return "tgi"
    if any(n.startswith("llamacpp:") for n in values):
        return "llamacpp"
    return "vllm"


def _buckets(found: dict[str, dict[float, float]], names: tuple[str, ...]) -> Buckets | None:
    """Return the first family's cumulative buckets, sorted, or None when absent or malformed."""
    for name in names:
        per_le = found.get(name)
        if not per_le or not any(math.isinf(le) for le in per_le):
            continue  # a histogram without +Inf is truncated: unusable
        ordered = tuple(sorted(per_le.items()))
        counts = [c for _, c in ordered]
        if all(math.isfinite(c) and c >= 0 for c in counts) and counts == sorted(counts):
            return ordered
    return None
