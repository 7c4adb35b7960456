"""What marking a misroute needs besides the case itself: the configuration, and the feedback sent to the gateway.

The feedback is the gateway's own ``POST /v1/feedback`` (``correct: false`` and the model it should
have gone to), sent to the server the app reads (``ROUTELENS_API_URL``) with the first of the
gateway's keys when ``gateway.api_keys_env`` names them. A second verdict for the same request is
the gateway's 409, reported as such.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path

from app.reader import api_from_env
from app.ui.limits import CONFIG_ENV
from schemas.config import RouteLensConfig
from schemas.trace import DecisionTrace

__all__ = ["config_path", "default_target", "post_feedback", "target_options"]

DEFAULT_CONFIG = "routelens.yaml"
TIMEOUT_S = 5.0


def config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """The configuration the app runs with (:data:`CONFIG_ENV`, else ``routelens.yaml`` here); None if absent."""
    env = os.environ if environ is None else environ
    path = Path(env.get(CONFIG_ENV, "").strip() or DEFAULT_CONFIG)
    return path if path.is_file() else None


def target_options(trace: DecisionTrace) -> list[str]:
    """The models the request could have gone to: its candidates' models, the chosen one first."""
    models = [trace.selected_model] if trace.selected_model else []
    return list(dict.fromkeys([*models, *(c.model for c in trace.candidates)]))


def default_target(trace: DecisionTrace, options: list[str]) -> int:
    """Index of the model to offer first: the best-ranked candidate of another model than the one chosen."""
    ranked = sorted((c for c in trace.candidates if c.model != trace.selected_model), key=lambda c: c.rank or 1 << 30)
    return options.index(ranked[0].model) if ranked else 0


def post_feedback(trace: DecisionTrace, expected_model: str, now: datetime, config: RouteLensConfig | None,
                  environ: Mapping[str, str] | None = None) -> str:
    """Send "misrouted, should have gone to ``expected_model``" for ``trace``; return what happened, in words."""
    env = os.environ if environ is None else environ
    server = api_from_env(env)
    if server is None:
        return "feedback not sent: the app reads a trace file, not a gateway"
    body = json.dumps({"request_id": trace.request_id, "correct": False, "expected_model": expected_model,
                       "source": "app", "ts": now.isoformat()}).encode()
    headers = {"Content-Type": "application/json"}
    name = None if config is None else config.gateway.api_keys_env
    if name and (keys := env.get(name, "").strip()):
        headers["Authorization"] = f"Bearer {keys.split(',')[0].strip()}"
    req = urllib.request.Request(f"{server[0].rstrip('/')}/v1/feedback", data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:  # noqa: S310  (the configured server)
            return f"feedback recorded (HTTP {resp.status})"
    except urllib.error.HTTPError as exc:
        exc.close()
        if exc.code == 409:
            return "feedback already recorded for this request (HTTP 409): the case is written all the same"
        return f"feedback not recorded: HTTP {exc.code} from {server[0]}"
    except OSError as exc:
        return f"feedback not recorded: {server[0]} unreachable ({exc})"
