"""What the ``sim`` commands share: a flag-naming error line, and a JSON call to a simulated instance or the gateway.

Shared by :mod:`app.cli.sim` and :mod:`app.cli.sim_traffic`; not a command (not in :data:`app.cli.COMMANDS`).
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import ValidationError

_BOUNDS = {"greater_than": "> {gt}", "greater_than_equal": ">= {ge}", "less_than": "< {lt}",
           "less_than_equal": "<= {le}"}


def _flag_error(exc: ValidationError, flags: dict[str, str]) -> str:
    """The first error of ``exc`` as one line naming the flag (``--rps must be > 0``)."""
    first = exc.errors(include_url=False)[0]
    loc = [str(part) for part in first["loc"]]
    flag = next((flags[part] for part in loc if part in flags), None)
    ctx = first.get("ctx") or {}
    if first["type"] in _BOUNDS:
        what = "must be " + _BOUNDS[first["type"]].format(**{k: f"{v:g}" if isinstance(v, float) else v
                                                              for k, v in ctx.items()})
    elif first["type"] == "literal_error" and flag == "--mix":
        return f"--mix: {loc[1]!r} is not a query class (expected {ctx.get('expected', '')})"
    else:
        what = str(first["msg"]).removeprefix("Value error, ")
    if flag is None:  # a check across fields ("a surge curve needs surge_start_s"): name their flags
        return re.sub(r"\b[a-z_]+\b", lambda m: flags.get(m.group(), m.group()), what)
    return f"{flag} {what}"


def _call(method: str, url: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    # A simulated instance's admin API or the gateway's /v1/models, not the store's: the store's client
    # (ingest.HttpTraceStore) does not apply.
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")

