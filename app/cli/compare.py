"""``routelens compare A B --since ISO --until ISO``: two arms, router versions or policies, metric by metric.

A and B are compared ``--by`` arm, version or policy hash; without ``--by`` the first of those that
holds both names in the window is used (a policy hash may be given by a unique prefix of at least
6 characters, after an optional ``sha256:``). The designed shares for the sample-ratio check (the
fractions of the traffic A and B were meant to get: two numbers in (0, 1] that sum to at most 1)
come from ``--shares``, else from the configuration's ``experiments.arms`` (by arm, the two arms'
shares; by version, the shares of the arms running each version, summed). Without them (by policy
hash, or names no arm has) the split is assumed 50/50 and not checked: the report says "designed
shares unknown, assumed 50/50" and flags no mismatch.

Prints a table (stderr notes, stdout table) or, with ``--json``, the report as one JSON line last:
``{"a", "b", "n_a", "n_b", "forced_a", "forced_b", "srm_p", "metrics": {NAME: {"a", "b", "delta", "ci": [lo, hi],
...}}, ...}`` (``forced_*``: requests forced onto an arm by header, in no figure).
Exit codes: 0 a report (even "not enough data", which the report says), 2 bad input (a time that
is not ISO 8601, an empty window, an unknown A or B, a policy prefix under 6 characters, shares that
cannot be, an unreachable store).
"""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from app.cli._common import BadInput, api_url, fail, help_text, parse_window, read_error, stdout_console
from app.config import load_config

if TYPE_CHECKING:
    from ingest import TraceStore
    from schemas.config.experiments import ExperimentsSettings
    from schemas.experiments import CompareBy, CompareReport

__all__ = ["MIN_PREFIX", "UNKNOWN_SHARES", "BadInput", "designed_shares", "parse_shares", "register", "resolve_by",
           "run_compare"]

# As ingest.experiments.compare words it (ingest.assumed_even_split writes it); a test pins the two equal.
UNKNOWN_SHARES = "designed shares unknown, assumed 50/50"

_BY = ("arm", "version", "policy")
_TIMEOUT_S = 60.0  # compare aggregates the whole window server-side
MIN_PREFIX = 6  # characters of a policy hash prefix (after "sha256:"): fewer would match by chance
_PREFIX_RULE = f"a policy hash prefix needs at least {MIN_PREFIX} characters, not counting 'sha256:'"


def _short_prefix(name: str) -> bool:
    return len(name.split(":", 1)[-1]) < MIN_PREFIX


def _resolve_name(name: str, groups: dict[str, int], by: str) -> str | None:
    if name in groups:
        return name
    if by == "policy" and not _short_prefix(name):  # a unique prefix of a policy hash, with or without "sha256:"
        found = [g for g in groups if g.startswith(name) or g.split(":", 1)[-1].startswith(name)]
        if len(found) == 1:
            return found[0]
    return None


def _too_short(names: list[str], groups: dict[str, int]) -> list[str]:
    """The names among ``names`` too short to be a policy hash prefix (and not a whole hash of ``groups``)."""
    return [n for n in names if n not in groups and _short_prefix(n)]


def resolve_by(store: TraceStore, a: str, b: str, by: str | None, since: datetime,
               until: datetime) -> tuple[CompareBy, str, str, dict[str, int]]:
    """Return ``(by, a, b, groups)``: what A and B are, their full names, and the window's requests per name.

    Raises:
        BadInput: The window holds no traces, or A or B is not one of its names.
    """
    tried: dict[str, dict[str, int]] = {}
    for candidate in ([by] if by else _BY):
        groups = store.experiment_groups(cast("CompareBy", candidate), since, until)
        tried[candidate] = groups
        ra, rb = _resolve_name(a, groups, candidate), _resolve_name(b, groups, candidate)
        if ra is not None and rb is not None:
            return cast("CompareBy", candidate), ra, rb, groups
    if by == "policy" and (short := _too_short([a, b], tried["policy"])):
        raise BadInput(f"{', '.join(repr(n) for n in short)}: too short: {_PREFIX_RULE}")
    if not any(tried.values()) and (by is None or by in tried):
        window = f"{since.isoformat()} .. {until.isoformat()}"
        kinds = "traces" if by is None else {"arm": "traces with an experiment arm",
                                             "version": "traces", "policy": "traces"}[by]
        raise BadInput(f"no {kinds} between {window}")
    lines = []
    for kind, groups in tried.items():
        missing = [n for n in (a, b) if _resolve_name(n, groups, kind) is None]
        known = ", ".join(f"{g} ({n})" for g, n in list(groups.items())[:12]) or "none"
        why = f" ({_PREFIX_RULE})" if kind == "policy" and _too_short(missing, groups) else ""
        lines.append(f"  by {kind}: unknown {', '.join(repr(m) for m in missing)}{why}; known: {known}")
    raise BadInput("A and B must both be names in the window:\n" + "\n".join(lines))


def parse_shares(text: str) -> tuple[float, float]:
    """``--shares A,B``: the fractions of the traffic A and B were designed to get.

    Each is in (0, 1] and the two sum to at most 1 (less when the design has other arms).

    Raises:
        BadInput: Not two numbers, one outside (0, 1], or a sum above 1 (the message names ``--shares``).
    """
    try:
        sa, sb = (float(x) for x in text.split(","))
    except ValueError as exc:
        raise BadInput(f"--shares {text!r} must be two numbers, e.g. 0.5,0.5") from exc
    if not (0 < sa <= 1 and 0 < sb <= 1):  # NaN fails both comparisons
        raise BadInput(f"--shares {text!r}: each share is a fraction of the traffic, above 0 and at most 1")
    if sa + sb > 1 + 1e-9:
        raise BadInput(f"--shares {text!r}: the shares of A and B sum to {sa + sb:g}, more than all the traffic (1)")
    return sa, sb


def designed_shares(experiments: ExperimentsSettings | None, by: str, a: str, b: str) -> tuple[float, float] | None:
    """The traffic shares A and B were designed to get, from ``experiments.arms`` (None: unknown).

    By arm, the two arms' shares; by version, the shares of the arms running each router version,
    summed. Unknown: no experiment, a name no arm has (or one with no share), or a policy hash.
    """
    if experiments is None or by not in ("arm", "version"):
        return None
    shares: dict[str, float] = {}
    for arm in experiments.arms:
        key = arm.name if by == "arm" else arm.router_version
        shares[key] = shares.get(key, 0.0) + arm.share
    sa, sb = shares.get(a, 0.0), shares.get(b, 0.0)
    return (sa, sb) if sa > 0 and sb > 0 else None


def _designed_shares(args: argparse.Namespace, by: str, a: str, b: str) -> tuple[float, float] | None:
    if args.shares:
        return parse_shares(args.shares)
    if not Path(args.config).is_file():
        return None
    return designed_shares(load_config(args.config).experiments, by, a, b)


def _open(args: argparse.Namespace) -> TraceStore:
    from app.reader import open_reader, token_from_config
    from ingest import HttpTraceStore

    if args.db:
        return open_reader(db=args.db)
    return HttpTraceStore(api_url(args), timeout_s=_TIMEOUT_S, token=token_from_config(args.config))


def run_compare(store: TraceStore, args: argparse.Namespace) -> CompareReport:
    """Resolve A and B in the window and compare them (the command without its output).

    Raises:
        BadInput: Bad times, an empty window, unknown names, bad shares.
    """
    from pydantic import ValidationError

    from schemas.experiments import CompareQuery

    since, until = parse_window(args.since, args.until)
    if args.shares:
        parse_shares(args.shares)  # refused before the store is asked
    if args.a == args.b:
        raise BadInput("A and B must differ")
    by, a, b, _groups = resolve_by(store, args.a, args.b, args.by, since, until)
    if a == b:
        raise BadInput(f"A and B name the same {by}: {a}")
    shares = _designed_shares(args, by, a, b)
    try:
        query = CompareQuery(a=a, b=b, by=by, start=since, end=until, shares=shares or (0.5, 0.5),
                             min_samples=args.min_samples)
    except ValidationError as exc:  # name the flag: "Input should be greater than or equal to 1" said nothing of which
        first = exc.errors()[0]
        flag = {"min_samples": "--min-samples", "shares": "--shares"}.get(str(first["loc"][0]) if first["loc"] else "")
        raise BadInput(f"{flag}: {first['msg']}" if flag else str(first["msg"])) from exc
    from ingest import assumed_even_split

    report = store.compare(query)
    return report if shares is not None else assumed_even_split(report)


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _print_table(report: CompareReport) -> None:
    from rich.table import Table

    t = Table(title=f"{report.by} {report.a} (A) vs {report.b} (B), {report.start:%Y-%m-%d %H:%M} .. "
                    f"{report.end:%Y-%m-%d %H:%M} UTC", title_justify="left")
    for col in ("metric", "A", "B", "B - A", f"{report.confidence:.0%} CI", "p", ""):
        t.add_column(col, justify="left" if col in ("metric", "") else "right", no_wrap=True)
    for name, m in report.metrics.items():
        ci = "-" if m.ci is None else f"[{_fmt(m.ci[0], 3)}, {_fmt(m.ci[1], 3)}]"
        mark = "[bold green]yes[/]" if m.significant_after_correction else (
            "[yellow]few[/]" if not m.enough_data else "")
        p = "-" if m.p_adjusted is None else ("<0.001" if m.p_adjusted < 0.001 else f"{m.p_adjusted:.2g}")
        t.add_row(name, _fmt(m.a, 3), _fmt(m.b, 3), _fmt(m.delta, 3), ci, p, mark)
    console = stdout_console()
    console.print(t)
    srm = "-" if report.srm_p is None else f"{report.srm_p:.3g}"
    design = UNKNOWN_SHARES if UNKNOWN_SHARES in report.verdict else \
        f"designed {report.shares[0]:g}/{report.shares[1]:g}"
    forced = f"; forced by header, left out: A {report.forced_a}, B {report.forced_b}" \
        if report.forced_a + report.forced_b else ""
    console.print(f"requests: A {report.n_a}, B {report.n_b} ({design}); "
                  f"sample-ratio p = {srm}" + (" [bold red]SRM[/]" if report.srm_flag else "") + forced)
    console.print("p: Holm-adjusted over the metrics; yes: significant after it; few: not enough data")
    console.print(f"[bold]{report.verdict}[/]")


def _run(args: argparse.Namespace) -> int:
    from ingest import SinkError

    try:
        store = _open(args)
    except SinkError as exc:
        fail(f"cannot read traces: {read_error(exc, args)}")
        return 2
    try:
        report = run_compare(store, args)  # its BadInput is main's: one line, exit 2
    except SinkError as exc:
        fail(f"cannot read traces: {read_error(exc, args)}")
        return 2
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()
    if args.json:
        print(report.model_dump_json())
    else:
        _print_table(report)
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``compare``."""
    p = sub.add_parser("compare", parents=[common], help="compare two arms, router versions or policies",
                       description=help_text(__doc__), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", metavar="A", help=f"arm, router version or policy hash, or a unique prefix of one of at "
                   f"least {MIN_PREFIX} characters (the baseline)")
    p.add_argument("b", metavar="B", help="the same for the candidate")
    p.add_argument("--since", required=True, help="window start, ISO 8601 (no zone: UTC)")
    p.add_argument("--until", required=True, help="window end (exclusive), ISO 8601 (no zone: UTC)")
    p.add_argument("--by", choices=_BY, help="what A and B are (default: arm, else version, else policy)")
    p.add_argument("--shares", help="designed traffic shares of A and B for the SRM check, e.g. 0.5,0.5: each in "
                   "(0, 1], summing to at most 1 (default: the arms' shares in the config's experiments.arms, by "
                   "arm or version; else unknown, assumed 50/50 and not checked)")
    p.add_argument("--min-samples", type=int, default=100, help="fewest requests per side for a verdict")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--api", help="server URL (default: from the config, else http://127.0.0.1:8080)")
    src.add_argument("--db", help="read a DuckDB file that no process writes, instead of the API")
    p.add_argument("--json", action="store_true", help="print the report as JSON (one line, last)")
    p.set_defaults(func=_run)
