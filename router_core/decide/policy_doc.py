"""The effective policy as one document, its hash, and the policy a stored document decides with again.

A gateway decides with more than its configuration's decision sections: the routing file's rules
(reloaded when the file changes), the intents' routes and fitted thresholds. The document holds
all of it as JSON; its SHA-256 is the ``policy_hash`` its traces carry, and it is stored once under
that hash (``schemas.policy_record.PolicyRecord``). :func:`from_document` rebuilds what a replay
needs from it: the configuration and the compiled rule set, whatever the files say today.

Paths are kept by file name only: the same policy installed in another folder has the same hash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from router_core.rules.ir import RuleSet
from router_core.rules.load import compile_policy
from schemas.config import RouteLensConfig

__all__ = ["FORMAT", "document_hash", "from_document", "policy_document"]

FORMAT = 1
# Every section a decision, the rule layer or the gateway's state machines read (not storage, probes, the app...).
_SECTIONS = {"fleet", "constraints", "scoring", "scrape", "models", "router", "routing", "throttles", "economics",
             "resilience"}


def _name(path: Any) -> Any:
    return Path(path).name if isinstance(path, str) and path else path


def policy_document(config: RouteLensConfig, rules: RuleSet | None,
                    intents: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The effective policy: ``config``'s decision sections, the rule set's text, the intents' routes and thresholds."""
    sections = config.model_dump(mode="json", include=_SECTIONS)
    sections["router"].pop("version", None)  # a label of the traces, not of the decision
    for instance in sections["fleet"]["instances"]:
        instance.pop("api_key_env", None)  # credentials never change a decision
    # probes: only whether verdicts are followed (it puts the probe filter in the plugin list: plugin_specs.py)
    sections["probes"] = {"enabled": bool(config.probes.enabled or config.probes.follow_url)}
    routing = sections["routing"]
    routing["policy"] = _name(routing.get("policy"))
    if isinstance(routing.get("intents"), dict):
        routing["intents"]["routes"] = _name(routing["intents"].get("routes"))
    return {
        "format": FORMAT,
        "config": sections,
        "rules": None if rules is None else {"source": _name(rules.source), "text": rules.text},
        "intents": None if intents is None else dict(intents),
    }


def canonical(document: Mapping[str, Any]) -> str:
    """The document as canonical JSON (sorted keys, no spaces): what is hashed and stored."""
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def document_hash(document: Mapping[str, Any]) -> str:
    """``sha256:`` and the first 16 hex digits of the canonical JSON's SHA-256."""
    return "sha256:" + hashlib.sha256(canonical(document).encode()).hexdigest()[:16]


def from_document(text: str) -> tuple[RouteLensConfig, RuleSet | None]:
    """The configuration and compiled rule set a stored document describes.

    Raises:
        ValueError: Not a policy document of a known format.
        pydantic.ValidationError: Its configuration does not validate (a newer format).
        PolicyError: Its rules do not compile.
    """
    doc = json.loads(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a policy document of format {FORMAT}")
    config = RouteLensConfig.model_validate(doc["config"])
    rules = doc.get("rules")
    return config, None if not rules else compile_policy(rules["text"], rules["source"], config)
