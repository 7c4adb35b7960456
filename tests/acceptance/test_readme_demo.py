"""``make demo`` on a fresh clone, as the README shows it: URLs and a request id, the printed trace command,
the README's SDK snippet, and a clean Ctrl-C. The tests run in file order against one demo; Ctrl-C is last.
"""

from __future__ import annotations

import json
import re
import shlex
import signal
from urllib.parse import urlsplit

import pytest

from app.run.procs import port_is_free
from tests.acceptance.conftest import Clone, Demo, processes_in, running
from tests.acceptance.readme import first_python_block, printed_model
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README_GATEWAY = "http://127.0.0.1:8080"  # the address the README's snippet is written for
BAD_WORDS = ("ERROR", "WARNING", "Traceback", "Warning:")  # nothing a healthy run and shutdown prints
FREE_WITHIN_S = 5
PROBE_ROUND_S = 120


def test_make_demo_prints_its_urls_and_a_request_id(demo: Demo) -> None:
    up = running(demo)
    assert re.fullmatch(r"req_[0-9a-f]+", up.request_id), up.request_id
    for url in (up.gateway, up.app, *up.instances.values()):
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url


def test_the_printed_trace_command_works_as_typed(demo: Demo, clone: Clone) -> None:
    up = running(demo)
    demo.wait_until(lambda lines: len(lines) > up.request_line + 1, 30)  # it comes a moment after
    printed = demo.lines[up.request_line + 1] if len(demo.lines) > up.request_line + 1 else ""
    expected = f"    .venv/bin/routelens trace {up.request_id} --api {up.gateway}"
    assert printed == expected, f"the line after the request id is {printed!r}, not {expected!r}"

    done = clone.run(shlex.split(printed))
    assert done.returncode == 0, f"{printed.strip()}: exit {done.returncode}\n{done.stdout}{done.stderr}"
    assert up.request_id in done.stdout, done.stdout
    instances = "|".join(re.escape(i) for i in up.instances)
    assert re.search(rf"\S+ → ({instances})\b", done.stdout), f"no 'model → instance' selection:\n{done.stdout}"


def test_the_readme_sdk_snippet_lands_where_the_readme_says(demo: Demo, clone: Clone) -> None:
    up = running(demo)
    block = first_python_block((clone.path / "README.md").read_text(encoding="utf-8"))
    model = printed_model(block)
    assert f"{README_GATEWAY}/v1" in block, f"the snippet does not name {README_GATEWAY}/v1:\n{block}"

    done = clone.run([clone.python, "-"], stdin=block.replace(README_GATEWAY, up.gateway))
    assert done.returncode == 0, f"the README's snippet failed:\n{done.stdout}{done.stderr}"
    printed = done.stdout.split()
    assert len(printed) == 2, f"the snippet printed {done.stdout!r}, not 'REQUEST_ID MODEL'"
    request_id, landed = printed
    assert landed == model, f"the README says {model}; the request {request_id} went to {landed}"

    shown = clone.run([clone.routelens, "trace", request_id, "--api", up.gateway, "--json"])
    assert shown.returncode == 0, shown.stdout + shown.stderr
    trace = json.loads(shown.stdout)
    assert (trace["request_id"], trace["selected_model"]) == (request_id, model), shown.stdout


def test_ctrl_c_stops_everything_cleanly(demo: Demo, clone: Clone, subtests: pytest.Subtests) -> None:
    """Last in the file: it ends the demo the other tests use.

    Ctrl-C comes after the first probe round has been printed (or ``PROBE_ROUND_S`` has passed), as a
    user who looked around would press it: the prober then has results to deliver while it stops.
    """
    up = running(demo)
    if any(line.startswith("  probes   every") for line in demo.lines):
        rounds = [re.compile(rf"^  probe    {re.escape(i)}\s+semantic ") for i in up.instances]
        demo.wait_until(lambda lines: all(any(r.search(x) for x in lines) for r in rounds), PROBE_ROUND_S)
    code = demo.interrupt()
    output = demo.output

    with subtests.test(msg="make exits as interrupted"):
        # GNU make, on SIGINT, waits for its recipe, then kills itself with SIGINT (a shell shows 130)
        assert code == -signal.SIGINT, f"make demo ended with {code} (None: still running after 60 s):\n{output}"
    with subtests.test(msg="demo stopped"):
        assert "demo stopped" in demo.lines, output
    with subtests.test(msg="no process left"):
        gone = wait_until(lambda: not processes_in(clone.path), FREE_WITHIN_S)
        assert gone, f"still running {FREE_WITHIN_S} s after make exited: {processes_in(clone.path)}"
    with subtests.test(msg="every port free"):
        ports = sorted({urlsplit(u).port or 80 for u in (up.gateway, up.app, *up.instances.values())})

        def taken() -> list[int]:
            return [p for p in ports if not port_is_free("127.0.0.1", p)]

        assert wait_until(lambda: not taken(), FREE_WITHIN_S), f"still taken {FREE_WITHIN_S} s after: {taken()}"
    with subtests.test(msg="no error or warning line"):
        bad = [line for line in demo.lines if any(word in line for word in BAD_WORDS)]
        assert not bad, "lines a healthy run and Ctrl-C should not print:\n" + "\n".join(bad)
