"""On "Why this model": mark the decision as a misroute and turn it into a regression case.

The operator names the model it should have gone to and where the case goes: a test case of a
policy file (the rule that should have matched) or an example of an intent route (the query as
they type it, accepted only when it hashes to the trace's query hash). "Preview" shows the change
as a diff and whether the current policy passes the case; "Write" applies it to the file and sends
the feedback. Logic in :mod:`app.regression` and :mod:`app.ui.data.misroute`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import streamlit as st

from app import regression
from app.config import load_config
from app.ui import widgets
from app.ui.data.decisions import hash_text
from app.ui.data.misroute import config_path, default_target, post_feedback, target_options
from router_core import PolicyError
from schemas.config import RouteLensConfig
from schemas.errors import ConfigError
from schemas.trace import DecisionTrace

__all__ = ["misroute_section"]

NO_RULE = "(no rule should match)"


def _config() -> tuple[RouteLensConfig | None, str | None]:
    path = config_path()
    if path is None:
        return None, "no configuration found (set ROUTELENS_CONFIG, or run the app from its folder)"
    try:
        return load_config(path), None
    except (ConfigError, OSError) as exc:
        return None, f"{path}: {exc}"


def _policy_change(trace: DecisionTrace, config: RouteLensConfig, model: str, typed: str) -> None:
    default = str(config.routing.policy or "")
    path = st.text_input("Policy file to add the case to", value=default, key="mis_policy_path")
    if not path:
        st.caption("The configuration names no policy file (routing.policy): name one to add the case to.")
        return
    try:
        from router_core import load_rules

        rules = load_rules(path, config)
    except (PolicyError, OSError) as exc:
        st.error(widgets.plain(str(exc)))
        return
    names = [r.name for r in rules.rules]
    wanted = next((r.name for r in rules.rules if r.primary == model), trace.rule if trace.rule in names else None)
    options = [*names, NO_RULE]
    rule = st.selectbox("The rule that should have matched", options,
                        index=options.index(wanted) if wanted in options else len(names),
                        key=f"mis_rule:{model}")  # its default follows the model named
    name = st.text_input("Case name", value=f"{trace.request_id} should go to {model}", key=f"mis_case_name:{model}")
    if name in {c.name for c in rules.cases}:  # written already (Write pressed twice, or an earlier visit)
        st.info(widgets.plain(f"{path} already has a case named {name!r}: it is not added again. Name the case "
                              "differently to add another."))
        return
    expected_rule = None if rule == NO_RULE else rule
    target = next((r.primary for r in rules.rules if r.name == expected_rule), None)
    case = regression.case_from_trace(trace, name=name, rule=expected_rule, target=target, prompt=typed or None)
    try:
        change = regression.append_policy_case(path, case, config)
        result = regression.check_case(change, name, config)
    except (PolicyError, ValueError, OSError) as exc:
        st.error(widgets.plain(f"The case cannot be added: {exc}"))
        return
    verdict = "passes" if result.passed else (
        f"fails: it matches rule {result.rule or '-'} (target {result.target or '-'})")
    st.text(f"The current policy {verdict}.  `routelens policy test {path}` runs it with the others.")
    _offer(change, trace, model, config)


def _intent_change(trace: DecisionTrace, config: RouteLensConfig, model: str, typed: str) -> None:
    intents = config.routing.intents
    path = st.text_input("Routes file to add the example to", value=str(intents.routes) if intents else "",
                         key="mis_routes_path")
    if not typed:
        st.caption("Type the query above: an intent example is the query itself.")
        return
    if not path:
        return
    route = st.text_input("Intent route it belongs to", value=trace.intent or "", key="mis_route")
    if not route:
        return
    try:
        change = regression.append_intent_example(path, route, typed)
    except (ValueError, OSError) as exc:
        st.error(widgets.plain(f"The example cannot be added: {exc}"))
        return
    _offer(change, trace, model, config)


def _offer(change: regression.Change, trace: DecisionTrace, model: str, config: RouteLensConfig) -> None:
    st.code(change.diff, language="diff")
    if st.button("Write the case and send the feedback", key="mis_write"):
        try:
            regression.write(change)
        except (RuntimeError, OSError) as exc:
            st.error(widgets.plain(str(exc)))
            return
        sent = post_feedback(trace, model, datetime.now(UTC), config)
        st.success(widgets.plain(f"Written to {change.path}; {sent}."))


def misroute_section(trace: DecisionTrace) -> None:
    """The "Mark as misroute" expander of one decision."""
    with st.expander("Mark as misroute: make it a regression case"):
        config, problem = _config()
        if config is None:
            st.caption(widgets.plain(f"Cannot make a case here: {problem}."))
            return
        options = target_options(trace)
        if not options:
            st.caption("The decision had no candidate model to name instead.")
            return
        model = st.selectbox("It should have gone to", options, index=default_target(trace, options), key="mis_model")
        typed = st.text_input("The query, if you have it (checked against the trace's hash, never stored)",
                              key="mis_query", type="password")
        if typed and hash_text(typed) != trace.query_hash:
            st.warning("That text does not hash to this request's query hash; it is not used.")
            typed = ""
        kind = st.radio("Add it as", ["policy test case", "intent example"], horizontal=True, key="mis_kind")
        if kind == "policy test case":
            _policy_change(trace, config, model, typed)
        else:
            _intent_change(trace, config, model, typed)
        st.caption(widgets.plain(f"Configuration: {Path(config_path() or '').resolve()}"))
