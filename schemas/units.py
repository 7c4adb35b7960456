"""Durations, sizes and time zones as configuration writes them: ``1500ms``, ``10s``; ``12GB``; ``Asia/Shanghai``."""

from __future__ import annotations

import math
import re
from typing import Annotated
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AfterValidator

__all__ = ["ZoneName", "check_zone", "format_bytes", "parse_bytes", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)\s*$", re.I)
_SECONDS = {"ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.I)
# GPU memory is counted in binary units (nvidia-smi's "GB" are GiB), so GB and GiB are the same here.
_BYTES = {"b": 1, "kb": 2**10, "mb": 2**20, "gb": 2**30, "tb": 2**40,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_duration(value: object) -> float:
    """Return seconds from ``1500ms``, ``10s``, ``1.5m``, ``1h`` (a bare number is seconds).

    Raises:
        ValueError: On anything else, or a negative or non-finite value.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration (write e.g. 1500ms, 10s)")
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION.match(value)):
        seconds = float(m.group(1)) * _SECONDS[m.group(2).lower()]
    else:
        raise ValueError(f"{value!r} is not a duration (write e.g. 1500ms, 10s, 2m)")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"{value!r} is not a non-negative duration")
    return seconds


def parse_bytes(value: object) -> int:
    """Return bytes from ``12GB``, ``512MiB``, ``100KB`` (binary units; a bare number is bytes).

    Raises:
        ValueError: On anything else, or a negative value.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size (write e.g. 12GB)")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        size = round(float(m.group(1)) * _BYTES[m.group(2).lower()])
    else:
        raise ValueError(f"{value!r} is not a size (write e.g. 12GB, 512MiB)")
    if size < 0:
        raise ValueError(f"{value!r} is negative")
    return size


def format_bytes(n: int) -> str:
    """``n`` bytes in the units :func:`parse_bytes` reads (binary: ``1 GB`` is 2**30 bytes): ``812 KB``, ``3.4 GB``."""
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 10 * scale else f"{n / scale:.0f} {unit}"
    return f"{n} bytes"


def check_zone(value: str) -> str:
    """Return ``value`` if it is an IANA time zone name.

    Raises:
        ValueError: It is not one.
    """
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {value!r}") from exc
    return value


ZoneName = Annotated[str, AfterValidator(check_zone)]
