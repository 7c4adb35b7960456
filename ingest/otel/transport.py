"""OTLP/HTTP: one POST of a protobuf body to ``{endpoint}/v1/traces``, retried as the OTLP spec says.

Retried on a connection error and on 429, 502, 503 and 504, with exponential backoff (0.5 s
doubling, jittered by the injected random source), within the export's timeout; any other answer
ends it. ``OTEL_EXPORTER_OTLP_TRACES_HEADERS`` / ``OTEL_EXPORTER_OTLP_HEADERS`` (``k=v,k2=v2``,
URL-encoded), ``..._COMPRESSION`` (``gzip``) and ``..._CERTIFICATE`` (a CA bundle) are read as
the OpenTelemetry SDK's exporter reads them.
"""

from __future__ import annotations

import gzip
import logging
import random
import time
from collections.abc import Callable, Mapping

import requests
from opentelemetry.util.re import parse_env_headers

__all__ = ["OtlpHttp"]

log = logging.getLogger(__name__)
_RETRYABLE = {429, 502, 503, 504}
_MAX_TRIES = 6


def _env(environ: Mapping[str, str], name: str) -> str | None:
    """``OTEL_EXPORTER_OTLP_TRACES_<name>``, else ``OTEL_EXPORTER_OTLP_<name>``."""
    return environ.get(f"OTEL_EXPORTER_OTLP_TRACES_{name}") or environ.get(f"OTEL_EXPORTER_OTLP_{name}")


class OtlpHttp:
    """Sends OTLP bodies to one endpoint over a keep-alive session.

    Args:
        endpoint: The full URL (``.../v1/traces``).
        timeout_s: One export's time limit, retries included.
        environ: Where the ``OTEL_EXPORTER_OTLP_*`` variables are read.
        rand: Jitter of the backoff (seeded in tests); sleep and clock are injected too.
    """

    def __init__(self, endpoint: str, *, timeout_s: float = 10.0, environ: Mapping[str, str] | None = None,
                 rand: Callable[[], float] = random.random, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        env = environ or {}
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/x-protobuf",
                        **parse_env_headers(_env(env, "HEADERS") or "", liberal=True)}
        self.gzip = (_env(env, "COMPRESSION") or "").strip().lower() == "gzip"
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        self.verify: bool | str = _env(env, "CERTIFICATE") or True
        self._session = requests.Session()
        self._rand, self._sleep, self._clock = rand, sleep, clock

    def send(self, body: bytes) -> bool:
        """POST ``body``; True once the receiver took it, False when it refused or stayed unreachable."""
        data = gzip.compress(body) if self.gzip else body
        deadline = self._clock() + self.timeout_s
        for attempt in range(_MAX_TRIES):
            left = deadline - self._clock()
            if left <= 0:
                return False
            try:
                resp = self._session.post(self.endpoint, data=data, headers=self.headers, timeout=left,
                                          verify=self.verify)
                resp.close()
                if resp.status_code < 300:
                    return True
                problem, again = f"HTTP {resp.status_code}", resp.status_code in _RETRYABLE
            except requests.RequestException as exc:
                problem, again = type(exc).__name__, True
            backoff = 0.5 * 2**attempt * (0.8 + 0.4 * self._rand())
            if not again or attempt + 1 == _MAX_TRIES or self._clock() + backoff > deadline:
                log.warning("OTLP export to %s failed (%s)", self.endpoint, problem)
                return False
            self._sleep(backoff)
        return False

    def close(self) -> None:
        """Close the session."""
        self._session.close()
