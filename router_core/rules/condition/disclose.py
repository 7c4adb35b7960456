"""What an explanation may show of a value a condition read: the value, a fingerprint, or nothing.

Why each rule tried did not match is stored in every trace (``policy.tried[].detail``: the
store, the spools, ``GET /v1/traces/{id}``), so an explanation shows no more than the trace
may keep:

- a feature the router derives itself (lengths, ``language``, ``intent``, the attachments'
  detected types, the hour, the keyword score) is shown as read (``shown``): the trace records
  it among the request's features anyway;
- a request header or a ``metadata`` value is the caller's own text, which may be a customer's
  name or a token (``named``): it is shown only when it equals a literal its condition compares
  that feature against, or lists for it (the policy names it, so showing it tells nothing the
  policy does not); null and true/false are shown too. Any other value is *withheld*: its size
  and a fingerprint, ``<withheld: 9 chars, sha256:1a2b3c4d>``, say that two requests carried the
  same value, and the line still states the relation that failed (``!= "gold"``, ``not in [..]``);
- a header or metadata key named like a credential (``authorization``, ``x-auth-token``,
  ``metadata.api_key``: :func:`is_secret_name`) is never shown, not even as a fingerprint
  (``secret``): ``<redacted>``.

The fingerprint is the first 8 hex digits of the SHA-256 of the value (a string's UTF-8 bytes;
another value's compact JSON with sorted keys), keyed as the query hash is: with the key
``router.hash_key_env`` names it is an HMAC (``hmac-sha256:1a2b3c4d``), so a short guessable value
cannot be confirmed by hashing guesses without the key; without one it is plain
(``sha256:1a2b3c4d``: ``printf %s VALUE | sha256sum``). ``routelens policy explain`` with that value
gives it either way (it reads the same key). The key reaches a condition on the request it reads
(:attr:`RequestView.fingerprint_key`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Set
from typing import Any, Literal

__all__ = ["REDACTED", "Exposure", "disclose", "is_secret_name", "show", "withheld"]

Exposure = Literal["shown", "named", "secret"]
REDACTED = "<redacted>"
_MAX_SHOWN = 60  # characters of a value an explanation shows
# A header or metadata key containing one of these looks like a credential: never shown.
_SECRET_WORDS = ("auth", "token", "secret", "key", "passw", "pwd", "session", "cookie", "credential", "signature",
                 "csrf", "xsrf")


def is_secret_name(name: str) -> bool:
    """Whether a header name or metadata path looks like a credential's (``x-auth-token``, ``api_key``)."""
    folded = name.casefold()
    return any(word in folded for word in _SECRET_WORDS)


def show(value: Any) -> str:
    """Render a value for an explanation: JSON-like, cut at 60 characters."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    else:
        text = repr(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN - 3] + "..."


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    except (TypeError, ValueError):  # keys of mixed types, an int of 5,000 digits (a policy case's YAML)
        return type(value).__name__


def _size(value: Any) -> str:
    if isinstance(value, str):
        return f"{len(value)} char" + ("" if len(value) == 1 else "s")
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    return "a value"


def withheld(value: Any, key: bytes | None = None) -> str:
    """``<withheld: 9 chars, sha256:1a2b3c4d>``: the value's size and fingerprint, never the value.

    With ``key`` the fingerprint is an HMAC-SHA256 under it: ``hmac-sha256:1a2b3c4d``.
    """
    data = (value if isinstance(value, str) else _canonical(value)).encode("utf-8", "surrogatepass")
    if key is None:
        return f"<withheld: {_size(value)}, sha256:{hashlib.sha256(data).hexdigest()[:8]}>"
    return f"<withheld: {_size(value)}, hmac-sha256:{hmac.new(key, data, hashlib.sha256).hexdigest()[:8]}>"


def disclose(value: Any, exposure: Exposure, named: Set[Any], key: bytes | None = None) -> str:
    """How an explanation shows ``value``, read from a feature of this ``exposure``.

    Args:
        value: What the feature read.
        exposure: ``shown``, ``named`` (shown when in ``named``) or ``secret``.
        named: The literals the condition compares the feature against.
        key: The fingerprint's HMAC key (None: plain SHA-256); see :func:`withheld`.
    """
    if exposure == "secret":
        return REDACTED
    if exposure == "shown" or value is None or isinstance(value, bool):
        return show(value)
    if isinstance(value, str | int | float) and value in named:
        return show(value)
    return withheld(value, key)
