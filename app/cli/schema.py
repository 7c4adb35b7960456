"""``routelens schema``: the trace contract as JSON Schema or Arrow."""

from __future__ import annotations

import argparse
import json

_NO_LIMIT = 2**31 - 1  # pyarrow's element_size_limit is a C int


def _run(args: argparse.Namespace) -> int:
    from schemas.derive import arrow_schema, json_schema

    if args.arrow:
        # pyarrow cuts an element at 100 characters by default ("... 231 chars omitted"): the contract, whole
        print(arrow_schema().to_string(show_schema_metadata=False, truncate_metadata=False,
                                       element_size_limit=_NO_LIMIT))
    else:
        print(json.dumps(json_schema(), indent=2, ensure_ascii=False))
    return 0


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``schema``."""
    p = sub.add_parser("schema", parents=[common], help="print the trace contract")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="JSON Schema (the default)")
    fmt.add_argument("--arrow", action="store_true", help="the derived Arrow schema")
    p.set_defaults(func=_run)
