"""``routelens trace REQUEST_ID``: one decision as a tree, with the feedback on it (exit 1 unknown id, 2 no source).

A W3C trace id (32 hex, from a tracing backend) finds the decision of that trace
(:func:`app.reader.find_trace`). ``--json`` prints the same facts as the tree (:func:`trace_json`).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli._common import api_url, fail, read_error, stdout_console
from app.config import load_config
from app.reader import API_ENV

if TYPE_CHECKING:
    from ingest import DuckDBTraceStore, HttpTraceStore
    from schemas.feedback import Feedback
    from schemas.trace import DecisionTrace

Opener = Callable[[], "HttpTraceStore | DuckDBTraceStore"]


def _openers(args: argparse.Namespace) -> list[Opener]:
    """The stores to ask, in order; each is opened only if the one before could not answer."""
    from app.reader import open_reader, token_from_config

    if args.db:
        return [lambda: open_reader(db=args.db)]
    url, token = api_url(args), token_from_config(args.config)  # a bad --api is refused here, before any lookup
    openers: list[Opener] = [lambda: open_reader(api=url, token=token)]
    if not args.api and Path(args.config).is_file():
        # No server running (e.g. after the demo stopped): the configured file can be read directly.
        db = Path(load_config(args.config).storage.duckdb_path)
        if db.is_file():
            openers.append(lambda: open_reader(db=db))
    return openers


def _lookup(request_id: str, openers: list[Opener],
            args: argparse.Namespace) -> tuple[bool, DecisionTrace | None, list[str], Sequence[Feedback] | str | None]:
    """Return (answered, trace, errors, feedback): the first store that answers decides.

    The feedback is read from the same store once the trace is found: the verdicts on the request,
    or why they could not be read (a server without the read).
    """
    from app.reader import find_trace
    from ingest import SinkError

    errors: list[str] = []
    for opener in openers:
        try:
            store = opener()
            try:
                trace = find_trace(store, request_id)
                return True, trace, errors, None if trace is None else _feedback(store, trace.request_id)
            finally:
                store.close()
        except SinkError as exc:
            errors.append(read_error(exc, args))
    return False, None, errors, None


def _feedback(store: HttpTraceStore | DuckDBTraceStore, request_id: str) -> Sequence[Feedback] | str:
    """The verdicts on ``request_id``, oldest first, or why they could not be read."""
    from ingest import SinkError

    try:
        return store.feedback(request_id)
    except (SinkError, ValueError) as exc:  # unreachable, no such read (an older server), an invalid record
        return str(exc)


def trace_json(trace: DecisionTrace, feedback: Sequence[Feedback] | str | None) -> str:
    """The trace as JSON, with the feedback the tree shows beside its fields (``--json``).

    The object is the whole DecisionTrace, field for field, plus two keys that are not part of
    it: ``feedback``, the verdicts on the request oldest first as ``GET /v1/feedback`` gives them
    (``[]``: none recorded; null: they could not be read), and ``feedback_error``, why they could
    not be read (else null). A script reading the trace's fields reads them where it always did;
    one validating it against ``routelens schema --json`` drops those two keys first.
    """
    out = json.loads(trace.model_dump_json())  # the trace's own serialisation, keys in its order
    if isinstance(feedback, str):
        out["feedback"], out["feedback_error"] = None, feedback
    else:
        out["feedback"] = None if feedback is None else [f.model_dump(mode="json") for f in feedback]
        out["feedback_error"] = None
    return json.dumps(out, indent=2, ensure_ascii=False)


def _run(args: argparse.Namespace) -> int:
    from app.cli.trace_tree import render_trace

    answered, trace, errors, feedback = _lookup(args.request_id, _openers(args), args)
    if not answered:
        # the default URL came from no configuration: say so, the user may be in another folder than they think
        guessed = not (args.api or args.db or os.environ.get(API_ENV) or Path(args.config).is_file())
        none = f" (no {args.config} in {Path.cwd()}: that URL is the default)" if guessed else ""
        fail(f"cannot read traces: {'; '.join(errors)}{none}")
        return 2
    if trace is None:
        fail(f"no trace for request_id '{args.request_id}'")
        return 1
    if args.json:
        print(trace_json(trace, feedback))
    else:
        stdout_console().print(render_trace(trace, feedback, candidates=args.candidates))
    return 0


CANDIDATES_SHOWN = 20  # in full by default: a big fleet's 200 candidates printed 1,456 lines


def _shown_count(text: str) -> int | None:
    if text == "all":
        return None
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a count of at least 1 or 'all', not {text!r}")
    return n


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``trace``."""
    p = sub.add_parser("trace", parents=[common], help="print one request's decision trace")
    p.add_argument("request_id", help="a request id (x-request-id), or a W3C trace id (32 hex) to find its decision")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--api", help="gateway URL (default: from the config, else http://127.0.0.1:8080)")
    src.add_argument("--db", help="read a DuckDB file that no process writes, instead of the API")
    p.add_argument("--json", action="store_true",
                   help="print the trace as JSON, with the feedback on it (keys 'feedback', 'feedback_error')")
    p.add_argument("--candidates", type=_shown_count, default=CANDIDATES_SHOWN, metavar="N|all",
                   help=f"candidates shown in full, best first, those tried or served always (default "
                        f"{CANDIDATES_SHOWN}; the others counted by verdict in one line); 'all' for every one")
    p.set_defaults(func=_run)
