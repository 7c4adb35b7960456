"""How much a RouteLens process logs, and in what form: ``--log-level``, ``--log-format`` and their variables.

``serve``, ``store``, ``probes run`` and ``demo`` take ``--log-level {debug,info,warning,error}`` and
``--log-format {text,json}``; ``ROUTELENS_LOG_LEVEL`` and ``ROUTELENS_LOG_FORMAT`` are their defaults
(a flag beats its variable), then ``warning`` and ``text``. Each of those entry points calls
:func:`configure` once; a process that starts others (``serve``, ``demo``) hands its choice on
through the two variables, so its workers, store and prober log the same way.

The level is RouteLens's own loggers' (``app``, ``router_core``, ``ingest``, ``probes``, ``sim``):
other libraries stay at ``warning`` (or ``error``), since their debug lines may carry a request's
URL or body. At ``warning`` a process may name loggers whose INFO lines it keeps (``serve``: the
intents fit's start and end).

``json`` writes one object a line: ``ts`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
``process`` (``serve``, ``gateway-N``, ``store``, ``prober``, ``demo``), and ``exc`` (an exception's
traceback) or ``stack`` when the record has one. Nothing else: a record's ``extra`` fields are left
out (aiohttp's access records carry the request line there), so the JSON says no more than the text.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

__all__ = ["DEFAULT_LOG", "FORMATS", "FORMAT_ENV", "JSON_LINE_START", "LEVELS", "LEVEL_ENV", "BadLogSetting",
           "JsonFormatter", "LogSettings", "add_log_arguments", "configure", "log_settings"]

LEVEL_ENV = "ROUTELENS_LOG_LEVEL"
FORMAT_ENV = "ROUTELENS_LOG_FORMAT"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}
FORMATS = ("text", "json")
OWN_LOGGERS = ("app", "router_core", "ingest", "probes", "sim")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
JSON_LINE_START = '{"ts":"'  # how every JSON line begins (a parent relays such a line from its child as it is)
# Characters str.splitlines() (and some log readers) break a line at that JSON leaves unescaped
_LINE_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


class BadLogSetting(ValueError):
    """A variable's log level or format that is none of the choices (the message names the variable)."""


@dataclass(frozen=True)
class LogSettings:
    """A process's log level (a key of :data:`LEVELS`) and format (one of :data:`FORMATS`)."""

    level: str = "warning"
    format: str = "text"

    def env(self) -> dict[str, str]:
        """The variables that give a child process these settings."""
        return {LEVEL_ENV: self.level, FORMAT_ENV: self.format}


DEFAULT_LOG = LogSettings()  # warning, text: what every process did before there was a choice


def log_settings(level: str | None, fmt: str | None, env: Mapping[str, str]) -> LogSettings:
    """The flags' values (None: not given), else the variables' in ``env``, else warning and text.

    Raises:
        BadLogSetting: A variable read (its flag not given) holds none of the choices.
    """
    return LogSettings(level=level or _from_env(env, LEVEL_ENV, tuple(LEVELS), "warning"),
                       format=fmt or _from_env(env, FORMAT_ENV, FORMATS, "text"))


def _from_env(env: Mapping[str, str], name: str, choices: Sequence[str], default: str) -> str:
    raw = env.get(name, "")
    value = raw.strip().lower()
    if not value:
        return default
    if value not in choices:
        raise BadLogSetting(f"{name}={raw!r} is not a log {name.rsplit('_', 1)[1].lower()}: "
                            f"choose from {', '.join(choices)}")
    return value


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--log-level`` and ``--log-format`` (None when not given: :func:`log_settings` reads the variables)."""
    parser.add_argument("--log-level", type=str.lower, choices=tuple(LEVELS),
                        help=f"how much RouteLens's own loggers write (default: ${LEVEL_ENV}, else warning); "
                        "the processes it starts log the same")
    parser.add_argument("--log-format", type=str.lower, choices=FORMATS,
                        help=f"text lines, or one JSON object a line: ts, level, logger, message, process, exc "
                        f"(default: ${FORMAT_ENV}, else text)")


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``message``, ``process``; ``exc``/``stack`` if any.

    Args:
        process: Names the process in every line (``serve``, ``gateway-1``, ``store``, ...).
    """

    def __init__(self, process: str) -> None:
        super().__init__()
        self.process = process

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON (line breaks in the message or traceback escaped)."""
        ts = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        line = {"ts": ts, "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage(),
                "process": self.process}
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exc"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, separators=(",", ":")).translate(_LINE_BREAKS)


def configure(settings: LogSettings, process: str, *, info_at_warning: Sequence[str] = ()) -> None:
    """Set up this process's logging once, on stderr (as ``logging.basicConfig``: not again when set up).

    Args:
        settings: The level and the format.
        process: What the JSON lines name this process.
        info_at_warning: Loggers whose INFO lines are kept at the ``warning`` level (the default).
    """
    level = LEVELS[settings.level]
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter(process) if settings.format == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=max(level, logging.WARNING), handlers=[handler])  # other libraries: warning at most
    if level < logging.WARNING:
        for name in OWN_LOGGERS:
            logging.getLogger(name).setLevel(level)
    elif level == logging.WARNING:
        for name in info_at_warning:
            logging.getLogger(name).setLevel(logging.INFO)
    logging.getLogger(__name__).debug("logging at %s in %s as %s", settings.level, settings.format, process)
