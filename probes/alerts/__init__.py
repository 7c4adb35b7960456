"""Alerts over probe results and verdicts, delivered to webhooks in Alertmanager's format."""

from probes.alerts.manager import EVENT_SEVERITY, AlertManager
from probes.alerts.notify import AiohttpPost, Post, WebhookNotifier, payload
from probes.alerts.rules import Alert, RuleBook, Transition, fingerprint

__all__ = [
    "EVENT_SEVERITY",
    "AiohttpPost",
    "Alert",
    "AlertManager",
    "Post",
    "RuleBook",
    "Transition",
    "WebhookNotifier",
    "fingerprint",
    "payload",
]
