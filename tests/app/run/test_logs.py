"""``app.run.logs``: the JSON line, the settings (flag over variable), and which loggers each level lets through."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.run.logs import (
    FORMAT_ENV,
    JSON_LINE_START,
    LEVEL_ENV,
    BadLogSetting,
    JsonFormatter,
    LogSettings,
    log_settings,
)
from app.run.procs import Child

ROOT = Path(__file__).resolve().parents[3]
KEYS = {"ts", "level", "logger", "message", "process"}
CREATED = 1_700_000_000.25  # 2023-11-14T22:13:20.25Z: the record's time, not the wall clock


def record(msg: str, *args: object, level: int = logging.WARNING, **fields: object) -> logging.LogRecord:
    rec = logging.makeLogRecord({"name": "ingest.pipeline.batcher", "levelno": level,
                                 "levelname": logging.getLevelName(level), "msg": msg, "args": args, **fields})
    rec.created = CREATED
    return rec


def one_line(rec: logging.LogRecord, process: str = "store") -> dict[str, object]:
    text = JsonFormatter(process).format(rec)
    assert len(text.splitlines()) == 1 and text.startswith(JSON_LINE_START), text
    out: dict[str, object] = json.loads(text)
    return out


def test_a_line_has_the_keys_time_in_utc_and_the_formatted_message() -> None:
    line = one_line(record("stored %d records in %s", 3, "t.duckdb"), process="gateway-1")
    assert line == {"ts": "2023-11-14T22:13:20.250000Z", "level": "warning", "logger": "ingest.pipeline.batcher",
                    "message": "stored 3 records in t.duckdb", "process": "gateway-1"}
    assert datetime.fromisoformat(str(line["ts"])) == datetime.fromtimestamp(CREATED, UTC)


def test_an_exception_s_traceback_is_exc_in_the_same_line() -> None:
    try:
        1 / 0  # noqa: B018
    except ZeroDivisionError:
        rec = record("flush failed", level=logging.ERROR, exc_info=sys.exc_info())
    line = one_line(rec)
    assert set(line) == KEYS | {"exc"} and line["message"] == "flush failed" and line["level"] == "error"
    exc = str(line["exc"])
    assert exc.startswith("Traceback (most recent call last):") and exc.endswith("ZeroDivisionError: division by zero")
    assert "1 / 0" in exc  # the traceback's source lines, as the text format shows them


def test_a_stack_is_kept_too() -> None:
    line = one_line(record("where", stack_info="Stack (most recent call last):\n  File \"x.py\", line 1"))
    assert set(line) == KEYS | {"stack"} and str(line["stack"]).endswith('line 1')


def test_a_non_ascii_message_is_written_as_is() -> None:
    message = "intents: 退款 route ready — café ✓ 🚀"
    text = JsonFormatter("serve").format(record(message))
    assert message in text  # readable in the line, not \\u-escaped
    assert json.loads(text)["message"] == message


@pytest.mark.parametrize("message", ["two\nlines", "crlf\r\nend", "tab\tand\x0bvt", "nel\x85end",
                                     "line\u2028separator\u2029paragraph", "\n"])
def test_a_line_break_in_the_message_keeps_the_record_on_one_line(message: str) -> None:
    assert one_line(record(message))["message"] == message


def test_extra_fields_are_left_out() -> None:
    # aiohttp's access records carry the request line in their extra fields: the JSON never writes them
    rec = record("%s", "GET /health", first_request_line="POST /v1/chat?q=CANARY", body="CANARY")
    text = JsonFormatter("serve").format(rec)
    assert "CANARY" not in text and set(json.loads(text)) == KEYS


@pytest.mark.parametrize(("flags", "env", "expected"), [
    ((None, None), {}, LogSettings("warning", "text")),
    ((None, None), {LEVEL_ENV: "debug", FORMAT_ENV: "json"}, LogSettings("debug", "json")),
    ((None, None), {LEVEL_ENV: " INFO ", FORMAT_ENV: "JSON"}, LogSettings("info", "json")),
    ((None, None), {LEVEL_ENV: "", FORMAT_ENV: ""}, LogSettings("warning", "text")),  # empty: unset
    (("error", "text"), {LEVEL_ENV: "debug", FORMAT_ENV: "json"}, LogSettings("error", "text")),
    (("info", None), {LEVEL_ENV: "loud"}, LogSettings("info", "text")),  # a flag given: its variable unread
], ids=["defaults", "variables", "case-and-spaces", "empty", "flags-win", "flag-over-bad-variable"])
def test_settings_flag_then_variable_then_default(
        flags: tuple[str | None, str | None], env: dict[str, str], expected: LogSettings) -> None:
    assert log_settings(*flags, env) == expected


@pytest.mark.parametrize(("env", "named"), [({LEVEL_ENV: "loud"}, LEVEL_ENV), ({FORMAT_ENV: "yaml"}, FORMAT_ENV)])
def test_a_bad_variable_is_refused_naming_it_and_the_choices(env: dict[str, str], named: str) -> None:
    with pytest.raises(BadLogSetting) as caught:
        log_settings(None, None, env)
    assert named in str(caught.value) and repr(env[named]) in str(caught.value)
    assert ("debug, info, warning, error" if named == LEVEL_ENV else "text, json") in str(caught.value)


EMIT = """
import logging, sys
from app.run.logs import LogSettings, configure
configure(LogSettings(sys.argv[1], sys.argv[2]), "t", info_at_warning=("router_core.gateway.live_intents",))
logging.getLogger("router_core.state.scraper").debug("own-debug")
logging.getLogger("ingest.pipeline.emitter").info("own-info")
logging.getLogger("router_core.gateway.live_intents").info("intents-info")
logging.getLogger("aiohttp.client").info("library-info")
logging.getLogger("probes.scheduler").warning("own-warning")
logging.getLogger("aiohttp.server").warning("library-warning")
logging.getLogger("app.run.serve").error("own-error")
"""
SEEN = {
    "debug": {"own-debug", "own-info", "intents-info", "own-warning", "library-warning", "own-error"},
    "info": {"own-info", "intents-info", "own-warning", "library-warning", "own-error"},
    "warning": {"intents-info", "own-warning", "library-warning", "own-error"},  # the intents' lines as before
    "error": {"own-error"},
}


def emitted(level: str, fmt: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", EMIT, level, fmt], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stderr.splitlines()


@pytest.mark.parametrize("level", list(SEEN))
def test_each_level_lets_through_its_own_loggers_lines_and_libraries_stay_at_warning(level: str) -> None:
    lines = emitted(level, "json")
    records = [json.loads(line) for line in lines]
    messages = {r["message"] for r in records if r["logger"] != "app.run.logs"}
    assert messages == SEEN[level], lines
    assert {r["process"] for r in records} == {"t"}
    said = [r["message"] for r in records if r["logger"] == "app.run.logs"]  # at debug, what it was set to
    assert said == (["logging at debug in json as t"] if level == "debug" else [])


def test_text_is_the_format_it_was() -> None:
    lines = emitted("warning", "text")
    assert len(lines) == len(SEEN["warning"]) and not any(line.startswith("{") for line in lines)
    assert any(line.endswith(" INFO router_core.gateway.live_intents: intents-info") for line in lines), lines
    assert any(line.endswith(" ERROR app.run.serve: own-error") for line in lines), lines


def test_a_parent_relays_its_child_s_json_lines_as_they_are(capfd: pytest.CaptureFixture[str]) -> None:
    json_line = '{"ts":"2023-11-14T22:13:20.250000Z","level":"info","logger":"x","message":"m","process":"store"}'
    child = Child("store", [sys.executable, "-c", f"print({json_line!r}); print('store ready')"], {}, None,
                  echo=True)
    child.proc.wait(30)
    for thread in threading.enumerate():
        if thread.name == "relay-store":
            thread.join(10)
    out = capfd.readouterr().out.splitlines()
    assert out == [json_line, "[store] store ready"]  # the JSON line parses; the others keep their prefix
