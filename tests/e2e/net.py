"""HTTP helpers of the end-to-end tests: a JSON request, "does this URL answer 200", a policy, a /metrics scrape."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from tests.promtext import Samples, samples


def call(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None,
         timeout: float = 10) -> tuple[int, Any]:
    """Send ``body`` (bytes as they are, anything else as JSON); return the status and the decoded JSON answer.

    An HTTP error status is returned, not raised; a connection error is raised.
    """
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def stored_policy(api: str, policy_hash: str) -> dict[str, Any] | None:
    """The policy stored under ``policy_hash`` (``GET /v1/policies/{hash}``), or None while it is not (yet)."""
    status, body = call("GET", f"{api}/v1/policies/{policy_hash}")
    return body if status == 200 else None


def ok(url: str, timeout: float = 10) -> bool:
    """Whether a GET of ``url`` answers 200; False for an error status or nothing listening."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return bool(resp.status == 200)
    except OSError:  # URLError and HTTPError included
        return False


def metrics(base_url: str) -> Samples:
    """One scrape of ``base_url``/metrics."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=10) as resp:
        return samples(resp.read().decode())


def drained(base_url: str, timeout_s: float = 60, every: float = 0.2) -> Samples:
    """Scrape ``base_url``/metrics until no trace is pending; return that scrape (fails after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while (m := metrics(base_url)).value("routelens_traces_pending") != 0 and time.monotonic() < deadline:
        time.sleep(every)
    assert m.value("routelens_traces_pending") == 0, f"traces still pending after {timeout_s} s: {m}"
    return m
