"""``serve --workers 2``: a repeated request id is kept apart whichever worker answers (the API audit's case).

A client's own id sent again through the other worker, and an id the gateway made sent back by a
client retrying with the ``x-request-id`` it got, were each stored as the first request's id: the
store kept the first trace and dropped the second as a duplicate.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

from tests.e2e.test_workers_shared import BODY, pytestmark, start  # noqa: F401 (pytestmark: redis-server needed)
from tests.polling import wait_until


def chat(url: str, request_id: str) -> tuple[str | None, str | None]:
    """One request on a new connection naming ``request_id``: the worker that answered and the trace id."""
    time.sleep(0.1)  # under the rule's 20/s (a burst of 2)
    req = urllib.request.Request(f"{url}/v1/chat/completions", data=json.dumps(BODY).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Connection": "close",
                                          "X-Request-Id": request_id})
    with urllib.request.urlopen(req, timeout=20) as resp:
        assert resp.status == 200
        return resp.headers.get("x-routelens-worker"), resp.headers.get("x-request-id")


def stored(url: str, request_id: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v1/traces/{request_id}", timeout=10) as resp:
            return bool(resp.status == 200)
    except urllib.error.HTTPError:
        return False


def test_a_repeated_id_gets_a_trace_of_its_own_through_either_worker(tmp_path: Path) -> None:
    fleet, gateway, url, _ = start(tmp_path)
    try:
        answers = []
        for _ in range(12):  # new connections, so the kernel spreads them over the workers
            answers.append(chat(url, "client-retry-7"))
        workers, ids = {w for w, _ in answers}, [rid for _, rid in answers]
        assert workers == {"0", "1"}, answers
        assert ids[0] == "client-retry-7" and len(set(ids)) == 12, ids
        assert all(rid is not None and rid.startswith("client-retry-7~") for rid in ids[1:])
        made = [chat(url, "")[1] for _ in range(4)]  # ids the gateway made, sent back as a client retries
        again = [chat(url, rid or "")[1] for rid in made]
        assert all(a and m and a.startswith(f"{m}~") for m, a in zip(made, again, strict=True)), (made, again)
        for rid in [*ids, *made, *again]:
            assert rid and wait_until(lambda r=rid: stored(url, r), 15), rid  # every trace stored, none dropped
    finally:
        gateway.stop()
        fleet.stop()
