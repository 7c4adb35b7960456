"""``routelens replay --since ISO --until ISO [--policy FILE | --verify]``: stored traces re-decided.

With ``--policy``, under another policy (below). Without it, or with ``--verify``, each trace under
the policy it was decided with (stored under its ``policy_hash``), compared step by step with what
was recorded; the report, ``{"n", "reproduced", "not_replayable": {REASON: N}, "mismatches":
[{"request_id", "first_differing_step", "live", "replayed"}], ...}``, is printed last with
``--json``, and the exit code is 1 when any decision came out different.

FILE is a whole ``routelens.yaml`` (its fleet included) or a policy file whose sections go into
``--config`` (see :mod:`app.experiments.policy_file`). ``--filter k=v`` narrows the traces (keys:
:data:`FILTER_KEYS`; ``arm`` and ``version`` are short for ``experiment_arm`` and
``router_version``). ``--db FILE`` reads a trace file no process writes, in bulk and on every
core; ``--api URL`` a running server's query API, trace by trace.

Prints a summary (stderr) or, with ``--json``, the report as one JSON line last:
``{"n", "replayed", "flip_rate", "flip_ci": [lo, hi], "matrix": {from: {to: n}}, ...}``. Exit codes:
0 a report, 2 bad input (a time that is not ISO 8601, an empty window, an unknown filter key, a
policy file that does not load, an unreachable or unreadable store), 1 a verified mismatch.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli._common import BadInput, api_url, err, fail, help_text, parse_window, positive_int, read_error

if TYPE_CHECKING:
    from schemas.queries import TraceFilter
    from schemas.replay_report import ReplayReport, VerifyReport

__all__ = ["FILTER_KEYS", "BadInput", "parse_filters", "register", "run_verify", "verify_summary"]

ALIASES = {"arm": "experiment_arm", "version": "router_version"}
FILTER_KEYS = ("model", "instance", "rule", "arm", "experiment_arm", "version", "router_version", "outcome",
               "fallback", "query_hash")
_BAR_FROM = 20_000  # a progress bar for ranges at least this large
_CAUSES_SHOWN = 8  # flip causes in the summary (the others counted in one line)


def parse_filters(items: list[str]) -> TraceFilter:
    """``k=v`` pairs into a :class:`TraceFilter`.

    Raises:
        BadInput: A pair without ``=``, an unknown key, or a value the filter refuses.
    """
    from pydantic import ValidationError

    from schemas.queries import TraceFilter

    fields: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise BadInput(f"--filter {item!r} must be key=value")
        if key not in FILTER_KEYS:
            raise BadInput(f"unknown filter key {key!r} (known: {', '.join(FILTER_KEYS)})")
        fields[ALIASES.get(key, key)] = value.strip()
    try:
        return TraceFilter.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInput(f"--filter {'.'.join(str(x) for x in first['loc'])}: {first['msg']}") from exc


def run_verify(args: argparse.Namespace) -> VerifyReport:
    """Re-decide the window under each trace's own policy (the command without its output).

    A trace file (``--db``) is read in bulk; a server's query API trace by trace.

    Raises:
        BadInput: Bad times, filter, store or an empty window.
    """
    import duckdb

    from app.experiments.verify import verify_file, verify_range
    from ingest import SinkError

    since, until = parse_window(args.since, args.until)
    flt = parse_filters(args.filter or [])
    source = _source(args)
    try:
        if isinstance(source, Path):
            report = verify_file(source, since, until, flt, workers=args.workers)
        else:
            try:
                report = verify_range(source, flt.model_copy(update={"start": since, "end": until}))
            finally:
                source.close()
    except (SinkError, duckdb.Error) as exc:
        raise BadInput(f"cannot read the traces: {read_error(exc, args)}") from exc
    except RuntimeError as exc:  # a worker process failed
        raise BadInput(str(exc)) from exc
    if report.n == 0:
        window = f"{since.isoformat()} .. {until.isoformat()}"
        raise BadInput(f"no stored traces between {window}" + (" matching the filter" if args.filter else ""))
    return report


def verify_summary(report: VerifyReport) -> None:
    """The report on stderr: how many came out the same, what could not be re-decided, the first mismatches."""
    err.print(f"{report.n:,} traces re-decided under their own policy ({report.policies} stored "
              f"polic{'y' if report.policies == 1 else 'ies'}): {report.reproduced:,} reproduced, "
              f"{report.mismatched:,} different, {sum(report.not_replayable.values()):,} not replayable")
    for reason, k in report.not_replayable.items():
        err.print(f"  not replayable: {k:,} — {reason}")
    for m in report.mismatches[:10]:
        err.print(f"  [red]mismatch[/red] {m.request_id}: {m.first_differing_step}: live {m.live!r}, "
                  f"replayed {m.replayed!r}")


def _source(args: argparse.Namespace) -> Any:
    from app.reader import token_from_config
    from ingest import HttpTraceStore

    if args.db:
        path = Path(args.db)
        if not path.is_file():
            raise BadInput(f"trace file {path} does not exist")
        return path
    return HttpTraceStore(api_url(args), timeout_s=30.0, token=token_from_config(args.config))


def run_replay(args: argparse.Namespace) -> ReplayReport:
    """Validate the input and replay (the command without its output).

    Raises:
        BadInput: Bad times, filter, store or an empty window.
        ConfigError: The policy file does not load.
    """
    import duckdb

    from app.experiments.policy_file import load_replay_policy
    from app.experiments.replay_range import replay_range
    from ingest import SinkError

    since, until = parse_window(args.since, args.until)
    flt = parse_filters(args.filter or [])
    config = load_replay_policy(args.policy, args.config)
    source = _source(args)
    try:
        with _Bar(enabled=not args.no_progress) as bar:
            report = replay_range(source, since, until, flt, config, policy_name=str(args.policy),
                                  progress=bar.update, workers=args.workers)
    except (SinkError, duckdb.Error) as exc:
        raise BadInput(f"cannot read the traces: {read_error(exc, args)}") from exc
    except RuntimeError as exc:
        raise BadInput(str(exc)) from exc
    if report.n == 0:
        window = f"{since.isoformat()} .. {until.isoformat()}"
        raise BadInput(f"no stored traces between {window}" + (" matching the filter" if args.filter else ""))
    return report


class _Bar:
    """A rich progress bar on stderr, shown once a range is large enough."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and err.is_terminal
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _Bar:
        return self

    def update(self, done: int, total: int) -> None:
        if not self.enabled or (total and total < _BAR_FROM):
            return
        if self._progress is None:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._progress = Progress(TextColumn("replaying"), BarColumn(), MofNCompleteColumn(),
                                      TimeRemainingColumn(), console=err, transient=True)
            self._progress.start()
            self._task = self._progress.add_task("replay", total=total or None)
        self._progress.update(self._task, completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


def _summary(report: ReplayReport) -> None:
    rate = "-" if report.flip_rate is None else f"{report.flip_rate:.2%}"
    ci = "" if report.flip_ci is None else f" (95% CI {report.flip_ci[0]:.2%} .. {report.flip_ci[1]:.2%})"
    err.print(f"{report.n:,} traces, {report.replayed:,} replayed, {report.not_replayable:,} not replayable")
    for reason, k in report.not_replayable_reasons.items():
        err.print(f"  not replayable: {k:,} — {reason}")
    err.print(f"flips: {report.flips:,} = {rate}{ci}; model changed in {report.model_flips:,}")
    for src, row in report.matrix.items():
        err.print(f"  {src} -> " + ", ".join(f"{dst} {n:,}" for dst, n in row.items()))  # most first (report_of)
    for cause in report.causes[:_CAUSES_SHOWN]:
        err.print(f"  cause {cause.kind}: {cause.name} ({cause.flips:,})")
    if (more := report.causes[_CAUSES_SHOWN:]):
        err.print(f"  … {len(more):,} more causes ({sum(c.flips for c in more):,} flips; --json lists every one)")
    for name, d in (("cost", report.cost), ("latency ms", report.latency)):
        if d.delta_mean is not None:
            err.print(f"predicted {name} per request: {d.delta_mean:+.4g} over {d.requests:,} requests ({d.basis})")
    for name, est in report.ips.items():
        if est.value is None or est.ci is None:
            err.print(f"inverse-propensity {name}: {est.note}")
        else:
            err.print(f"inverse-propensity {name}: {est.value:.4g} (95% CI {est.ci[0]:.4g} .. {est.ci[1]:.4g}; "
                      f"logged {est.logged_mean:.4g}; {est.matched:,} of {est.n:,} logged requests agree)")


def _verify(args: argparse.Namespace) -> int:
    report = run_verify(args)  # its BadInput is main's: one line, exit 2
    _report(args, report, verify_summary)
    return 1 if report.mismatched else 0


def _run(args: argparse.Namespace) -> int:
    from schemas.errors import ConfigError

    if args.verify or args.policy is None:
        if args.policy is not None:
            raise BadInput("--verify re-decides each trace under its own policy: drop --policy")
        return _verify(args)
    try:
        report = run_replay(args)
    except ConfigError as exc:
        fail(f"the policy does not load: {exc}")
        return 2
    _report(args, report, _summary)
    return 0


def _report(args: argparse.Namespace, report: Any, summary: Callable[[Any], None]) -> None:
    """The summary on stderr (unless ``--json --quiet``), then, with ``--json``, the report as one line last."""
    if not (args.json and args.quiet):
        summary(report)
    if args.json:
        sys.stdout.write(report.model_dump_json() + "\n")


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``routelens replay``."""
    p = sub.add_parser("replay", parents=[common],
                       help="re-decide stored traces: under another policy, or verified under their own",
                       description=help_text(__doc__).replace("`FILTER_KEYS`", ", ".join(FILTER_KEYS)),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--since", required=True, help="start of the window (ISO 8601, inclusive; no zone: UTC)")
    p.add_argument("--until", required=True, help="end of the window (ISO 8601, exclusive; no zone: UTC)")
    p.add_argument("--policy", help="a routelens.yaml or a policy file (default: each trace's own, verified)")
    p.add_argument("--verify", action="store_true",
                   help="re-decide under each trace's own stored policy and compare; exit 1 on any mismatch")
    p.add_argument("--filter", action="append", metavar="K=V", help=f"keys: {', '.join(FILTER_KEYS)}")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--api", help="a running server's URL (default: the config's gateway)")
    src.add_argument("--db", help="a DuckDB trace file no process writes")
    p.add_argument("--workers", type=positive_int, default=None,
                   help="processes for --db, at least 1 (default: one per core, up to 2)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON line last")
    p.add_argument("--quiet", action="store_true", help="with --json, no summary on stderr")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=_run)
