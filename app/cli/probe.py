"""``routelens probe URL``: run the probes once against one instance and print the results.

``--kind K`` runs one probe; with ``--json`` it prints exactly one ProbeResult object (fields
``kind``, ``instance``, ``verdict``, ``value``, ``threshold``, ``reason``, ...). Without
``--kind`` it runs syntax, latency and semantic (the last skipped, with a note, when the
embedding model is not installed); ``--json`` then prints a list. Exit 0 when every result is
``ok``, 1 otherwise: an instance that gives no answer (refused, timed out, a 5xx), even to ``GET
/v1/models``, fails every probe. Exit 2 on bad input (``--timeout`` not above 0, ``--api-key-env``
naming an unset variable, a URL that is not an http(s) URL with a host or that ends in ``/v1``) or when the
instance answers ``GET /v1/models`` with no model id. The
model defaults to the first id of the instance's ``GET /v1/models``. A single latency probe only learns (``learning
baseline (1/n)``) unless it has the instance's baseline: ``--baselines FILE``, or, for a URL of the
``--config`` fleet, the file the prober keeps (the instance is then probed under its id and model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.markup import escape

from app.cli._common import BadInput, config_of, err, fail, http_url, stdout_console
from probes.http import fetch
from probes.syntax import upstream_error
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import ProbeSettings
from schemas.probe import ProbeResult

__all__ = ["Unreachable", "api_key_of", "base_url", "first_model", "probe_settings", "register"]

_COLOURS = {ProbeVerdict.OK: "green", ProbeVerdict.DEGRADED: "yellow", ProbeVerdict.FAILED: "red"}


class Unreachable(ValueError):
    """The instance gave no answer to ``GET /v1/models`` (refused, timed out, a 5xx): every probe of it fails."""

    def __init__(self, message: str, error_class: str) -> None:
        super().__init__(message)
        self.error_class = error_class


def api_key_of(args: argparse.Namespace) -> str | None:
    """The API key held by ``--api-key-env VAR``, or None without it.

    Raises:
        ValueError: ``--timeout`` is not above 0, or VAR is not set (the message names the flag and the variable).
    """
    timeout = getattr(args, "timeout", None)
    if timeout is not None and not timeout > 0:  # NaN too
        raise ValueError(f"--timeout must be above 0 seconds, not {timeout:g}")
    if not args.api_key_env:
        return None
    key = os.environ.get(args.api_key_env)
    if not key:
        raise ValueError(f"--api-key-env {args.api_key_env}: the environment variable is not set (or is empty)")
    return key


def probe_settings(args: argparse.Namespace) -> ProbeSettings:
    """The ``probes`` section of ``--config`` when that file exists (else defaults), ``--timeout`` applied."""
    settings = config_of(args).probes if Path(args.config).is_file() else ProbeSettings()
    if getattr(args, "timeout", None) is not None:
        settings = settings.model_copy(update={"timeout_s": float(args.timeout)})
    return settings


async def first_model(session: aiohttp.ClientSession, url: str, timeout_s: float, api_key: str | None) -> str:
    """The first model id of ``GET {url}/v1/models``.

    Raises:
        Unreachable: No answer (connection, timeout) or a 5xx.
        ValueError: Another status, or no model id in the answer.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
    call = await fetch(session, "GET", f"{url.rstrip('/')}/v1/models", timeout_s=timeout_s, max_bytes=1 << 20,
                       headers=headers)
    if call.error_class is not None:
        raise Unreachable(f"GET /v1/models: {call.error}", call.error_class)
    if call.status is not None and call.status >= 500:
        raise Unreachable(f"GET /v1/models: HTTP {call.status}: {upstream_error(call.body)}", "http_status")
    if call.status != 200:
        raise ValueError(f"GET /v1/models: HTTP {call.status}: {upstream_error(call.body)}")
    try:
        return str(json.loads(call.body or b"")["data"][0]["id"])
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise ValueError(f"GET /v1/models: no model id in the answer ({exc})") from exc


def _print(out: Console, result: ProbeResult) -> None:
    colour = _COLOURS[result.verdict]
    value = "-" if result.value is None else f"{result.value:.4g}"
    bound = "-" if result.threshold is None else f"{result.threshold:.4g}"
    extra = f" reference={result.reference}" if result.reference else ""
    out.print(f"{result.kind.value:8} [{colour}]{result.verdict.value:8}[/{colour}] value={value} threshold={bound}"
              f" latency={result.latency_ms or 0:.0f}ms{extra}  {escape(result.reason)}")


async def _probe(args: argparse.Namespace) -> int:
    from probes.baselines import BaselineStore
    from probes.embedder import MiniLMEmbedder, available
    from probes.runner import ProbeRunner

    try:
        api_key = api_key_of(args)
    except ValueError as exc:
        fail(f"{exc}")
        return 2
    args.url = base_url(args.url)
    settings = probe_settings(args)
    instance, model_of, baselines = _as_configured(args)
    missing = available()
    kinds = [ProbeKind(args.kind)] if args.kind else list(ProbeKind)
    if ProbeKind.SEMANTIC in kinds and missing is not None and not args.kind:
        err.print(f"semantic probe skipped: the embedding model is {missing}")
        kinds.remove(ProbeKind.SEMANTIC)
    async with aiohttp.ClientSession() as session:
        try:
            model = args.model or model_of or await first_model(session, args.url, settings.timeout_s, api_key)
        except Unreachable as exc:  # no answer: every probe fails, as the prober would judge it
            results = [_unreachable(instance, args.model, kind, exc) for kind in kinds]
            return _report(args, results)
        except ValueError as exc:
            fail(f"{args.url}: {exc}")
            return 2
        target = Target(instance=instance, model=model, url=args.url.rstrip("/"), api_key=api_key)
        embedder = MiniLMEmbedder() if ProbeKind.SEMANTIC in kinds and missing is None else None
        store = BaselineStore(baselines)
        store.path = None  # read, never written: a one-off probe must not change the prober's file
        runner = ProbeRunner(settings.model_copy(update={"kinds": kinds}), session, embedder=embedder,
                             baselines=store)
        results = [await runner.run(kind, target) for kind in kinds]
    return _report(args, results)


def base_url(url: str, source: str = "URL") -> str:
    """``url`` as the instance's base URL (an http(s) URL with a host, not ending in ``/v1``).

    Raises:
        BadInput: It is not one (exit 2: the input is wrong, not the instance).
    """
    url = http_url(url, source)
    if urllib.parse.urlsplit(url).path.endswith("/v1"):
        raise BadInput(f"{source} {url!r} ends in /v1: give the instance's base URL without /v1 (the probes add "
                       "/v1/models and /v1/chat/completions)")
    return url


def _as_configured(args: argparse.Namespace) -> tuple[str, str | None, str | None]:
    """The instance id, model and latency baselines file to probe ``args.url`` with.

    A URL that is an instance of the ``--config`` fleet is probed as the prober probes it: under its
    id, its model, against the baseline the prober learned (``probes.latency.state_path``, else
    beside the trace file), so a latency page can be confirmed from the command line. The flags win.
    """
    instance, model, baselines = args.instance, args.model, args.baselines
    if not Path(args.config).is_file():
        return instance or args.url, model, baselines
    from app.run.prober import baselines_path

    config = config_of(args)
    url = args.url.rstrip("/")
    spec = next((s for s in config.fleet.instances if s.url.rstrip("/") == url), None)
    if spec is None:
        return instance or args.url, model, baselines
    if baselines is None:
        found = baselines_path(config, config.storage.duckdb_path)
        baselines = str(found) if found.is_file() else None
    err.print(f"{escape(url)} is {escape(spec.id)} of {escape(str(args.config))}"
              + (f"; latency baseline from {escape(baselines)}" if baselines else "; no learned baseline yet"))
    return instance or spec.id, model or spec.model, baselines


def _unreachable(instance: str, model: str | None, kind: ProbeKind, exc: Unreachable) -> ProbeResult:
    from probes.runner import new_probe_id

    return ProbeResult(probe_id=new_probe_id(), ts=datetime.now(UTC), instance=instance,
                       model=model or "unknown", kind=kind, verdict=ProbeVerdict.FAILED, reason=str(exc)[:2000],
                       error_class=exc.error_class)


def _report(args: argparse.Namespace, results: list[ProbeResult]) -> int:
    if args.json:
        docs = [r.model_dump(mode="json") for r in results]
        print(json.dumps(docs[0] if args.kind else docs, ensure_ascii=False))
    else:
        out = stdout_console(highlight=False)
        for result in results:
            _print(out, result)
    return 0 if all(r.verdict is ProbeVerdict.OK for r in results) else 1


def _run(args: argparse.Namespace) -> int:
    return asyncio.run(_probe(args))


def register(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Add ``probe``."""
    p = sub.add_parser("probe", parents=[common], help="probe one instance once (exit 0 ok, 1 degraded or failed)")
    p.add_argument("url", help="the instance's base URL (http://host:port)")
    p.add_argument("--kind", choices=[k.value for k in ProbeKind], help="one probe (default: all three)")
    p.add_argument("--model", help="model to ask for (default: the first of GET /v1/models)")
    p.add_argument("--instance", help="instance id in the result (default: the fleet's id of the URL, else the URL)")
    p.add_argument("--json", action="store_true", help="print the ProbeResult as JSON (a list without --kind)")
    p.add_argument("--timeout", type=float, metavar="S", help="per-request timeout (default: probes.timeout_s)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the instance's API key")
    p.add_argument("--baselines", metavar="FILE",
                   help="latency baselines file (default: the prober's, for a URL of the fleet; else none: it learns)")
    p.set_defaults(func=_run)
