"""The trace's routing-policy step in words and tables: the rule, the clauses tried, intent, keywords, files."""

from __future__ import annotations

from typing import Any

from app.explain import DASH, fmt_num
from schemas.trace_policy import PolicyStep

__all__ = ["MORE", "attachments_rows", "clauses_rows", "failed_atoms", "fmt_waited", "intent_sentence",
           "keyword_rows", "rule_sentence"]

MORE = "(other atoms failed too)"
"""The line the router adds after a rule's first failing atom when others failed too."""


def fmt_waited(seconds: float) -> str:
    """Seconds waited for a token as the explanations write them: ``0.42 s``, ``1.0 s``, ``0.005 s``."""
    text = f"{seconds:.{2 if seconds >= 0.1 else 3}f}".rstrip("0")
    return f"{text}0 s" if text.endswith(".") else f"{text} s"


def rule_sentence(step: PolicyStep) -> str:
    """Which rule matched after how many were tried, what its throttle did, where the request went, the chain.

    A throttle without a token decides before the target: the request goes down the chain
    (``chain``), is refused with a 429 and forwarded nowhere (``reject``; also a ``wait`` that ran
    out of ``max_wait``: then the time it waited), or is sent once a token comes (``wait``, with the
    time it waited; a trace from before ``waited_s`` was recorded says only that it waited).
    """
    tried = len(step.tried)
    if step.rule is None:
        return (f"No rule of {step.policy} matched ({tried} tried): every model was scored as usual."
                if tried else "No routing rule applies here: every model was scored as usual.")
    target = step.target or "every model"
    matched = f"Rule {step.rule} matched after {tried} tried"
    chain = " → ".join(step.chain)
    if step.throttled == "reject":
        refused = ("so the request" if step.waited_s is None else
                   f"and the request waited {fmt_waited(step.waited_s)} (its max_wait) without a token, so it")
        parts = [f"{matched}; its target would have been {target}, but its throttle was empty, {refused} "
                 "was refused with 429 (rate_limit_exceeded): nothing was forwarded."]
        if chain:
            parts.append(f"Chain {chain}; not tried.")
        return " ".join(parts)
    if step.throttled == "chain":
        head = (f"{matched}; its target would have been {target}, but its throttle was empty, so the request "
                "went down its chain instead.")
    elif step.throttled == "wait":
        waited = "" if step.waited_s is None else f" {fmt_waited(step.waited_s)}"
        head = (f"{matched}; its throttle was empty, so the request waited{waited} for a token, then was sent to "
                f"{target}.")
    else:
        head = f"{matched} and sent the request to {target}."
    parts = [head]
    if chain:
        parts.append(f"Chain {chain}; used {' → '.join(step.chain_used) or DASH}.")
    return " ".join(parts)


def clauses_rows(step: PolicyStep) -> list[dict[str, Any]]:
    """One row per rule tried, in order: matched or not, and why.

    The rule that matched shows each atom's verdict; a rule that did not, the atom that failed it
    first with the value it read (``request_time.hour = 17 not in [9, 11, 14, 16]``), then the
    others that failed when the trace lists them.
    """
    return [{"rule": t.rule, "matched": "yes" if t.matched else "no",
             "why": ("; ".join(t.detail) or DASH) if t.matched or not t.detail else failed_atoms(t.detail)}
            for t in step.tried]


def failed_atoms(detail: list[str]) -> str:
    """A failed rule's ``detail`` in words: the atom that failed it first, then that others failed too.

    ``input_length = 18 <= 8000; other atoms failed too`` when the router recorded :data:`MORE`
    (turning that atom alone would not have made the rule match), ``...; also <atom>`` when it
    listed the others. Empty ``detail``: an empty string.
    """
    if not detail:
        return ""
    first, rest = detail[0], [d for d in detail[1:] if d != MORE]
    if rest:
        return f"{first}; also {'; '.join(rest)}"
    return f"{first}; other atoms failed too" if len(detail) > 1 else first


def intent_sentence(step: PolicyStep) -> str | None:
    """The semantic intent verdict in words (None: no intent classifier ran)."""
    v = step.intent
    if v is None:
        return None
    cut = f" Input cut at {v.cut_tokens} tokens." if v.cut_tokens is not None else ""
    if v.waited_s is not None:
        cut += (f" The query waited {fmt_waited(v.waited_s)} for the intents' first fit (the gateway had just "
                "started) before it was classified.")
    threshold = DASH if v.threshold is None else fmt_num(v.threshold)
    if v.abstained:
        return (f"Intent abstained on the {v.path} path: nearest {v.nearest or DASH} at {fmt_num(v.confidence)} "
                f"< threshold {threshold}; the rule layer's intent decided.{cut}")
    return f"Intent {v.label} at {fmt_num(v.confidence)} (threshold {threshold}, {v.path} path).{cut}"


def keyword_rows(step: PolicyStep) -> list[dict[str, Any]]:
    """Each keyword pattern that matched, with its weight."""
    return [{"pattern": k.pattern, "weight": k.weight} for k in step.keywords]


def attachments_rows(step: PolicyStep) -> list[dict[str, Any]]:
    """Each attachment: where, declared type, type of its bytes, size, and whether they disagree."""
    return [{"where": f"messages[{a.message}].content[{a.part}]", "declared": a.declared or DASH,
             "detected": a.detected or DASH, "bytes": a.bytes, "mismatch": "yes" if a.mismatch else ""}
            for a in step.attachments]

