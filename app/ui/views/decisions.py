"""Decisions: search the traces of the sidebar's scope, a page at a time; each row opens "Why this model"."""

import streamlit as st

from app.ui import resources, widgets
from app.ui.data import decisions as dec
from app.ui.data.topology import parse_url_time
from app.ui.limits import load_limits
from app.ui.sidebar import scope, sync_param
from app.units import DASH, count
from ingest import MAX_LIMIT, BadCursor, SinkError
from schemas.queries import TraceFilter, TracePage

ROW_PX, HEAD_PX = 35, 38
# Shown on demand: the columns an operator hunting a request reads first (request, time, outcome, rule,
# model, fallback) fit a 1280 px window beside the sidebar, with room for a longer model name; with every
# column (or the instance too) the table scrolled sideways below about 1600 px.
MORE = {"instance": "instance", "total_ms": "total latency", "violations": "violations", "arm": "arm",
        "http": "http status", "decision_ms": "decision latency", "cost": "cost"}


@st.cache_data(ttl=10, max_entries=32, show_spinner=False)
def fetch_violations(flt: str, page: str, configured: tuple[str, ...]) -> dict[str, list[str]]:
    """The constraints a candidate broke in each decision of the page: one store search per constraint name
    (the configured ones and those the window's constraint counts name)."""
    store = resources.get_store()
    window = TraceFilter.model_validate_json(flt)
    seen = {s.constraint for s in store.constraint_stats(window)}
    return dec.page_violations(lambda f: [s.request_id for s in store.search(f, limit=MAX_LIMIT).items], window,
                               TracePage.model_validate_json(page), {*configured, *seen})


@st.cache_data(ttl=30, max_entries=16, show_spinner=False)
def fetch_violation_names(flt: str) -> tuple[str, ...]:
    """The constraints the store reports a candidate broke in the scope's window (probe, breaker, freshness...)."""
    try:
        return tuple(sorted({s.constraint for s in resources.get_store().constraint_stats(
            TraceFilter.model_validate_json(flt))}))
    except SinkError:
        return ()  # the search below says the source is unreachable


# A link from Topology or Constraints pinned to ?end= lists the decisions it counted, not those of a window
# ending now.
pinned = parse_url_time(st.query_params.get("end"))
sc = scope(now=pinned)
lim = load_limits()
st.title("Decisions")
st.caption("Every routing decision in the scope, newest first (arm, model and instance in the sidebar). Click a "
           "column to sort the page; open a row to see why its model was chosen.")
if pinned is not None:
    st.caption(f"Window pinned to end at {pinned.isoformat()} (`?end=`).")

FIELDS = ("rule", "fallback", "outcome", "violation", "min_ms", "max_ms", "qhash")
CHOICES = {"fallback": ["", "yes", "no"], "outcome": ["", "ok", "error"]}
# The configured constraints, those the store saw broken in the window and the link's own choice.
SEEN = fetch_violation_names(sc.trace_filter().model_dump_json())
VIOLATIONS = ["", *sorted({c.name for c in lim.constraints} | {*SEEN} | {st.query_params.get("violation", "")} - {""})]
for field in FIELDS:  # the URL wins on the first run of a session, the widgets after that
    if f"dec_{field}" not in st.session_state:
        given = st.query_params.get(dec.URL_KEYS[field], "")
        if field in CHOICES and given not in CHOICES[field]:
            shown = widgets.plain(f"{field}={given[:40]!r}")
            st.warning(f"Ignored {shown} from the link: choose one of the offered values.")
            given = ""
        st.session_state[f"dec_{field}"] = given
if "dec_pages" not in st.session_state:
    st.session_state.dec_pages = st.query_params.get("pages", "")
if "dec_unset" not in st.session_state:  # a Topology link to "(no model)" and the like: ?unset=model
    given = [n.strip() for n in st.query_params.get("unset", "").split(",") if n.strip()]
    if unknown := [n for n in given if n not in dec.UNSET_LABELS]:
        shown = widgets.plain(f"unset={','.join(unknown)[:40]!r}")
        st.warning(f"Ignored {shown} from the link: choose one of the offered values.")
    st.session_state.dec_unset = [n for n in dec.UNSET_LABELS if n in given]


def _hash_typed_query() -> None:
    """Hash the typed query (the text is dropped right here) and search by its hash."""
    text = st.session_state.get("dec_qtext", "")
    if text.strip():
        st.session_state.dec_qhash = dec.hash_text(text)
    st.session_state.dec_qtext = ""


c1, c2, c3, c4, c5, c6 = st.columns([2, 1, 1, 2, 1, 1])
c1.text_input("rule", key="dec_rule", placeholder="any")
c2.selectbox("fallback", CHOICES["fallback"], key="dec_fallback", format_func=lambda v: v or "any")
c3.selectbox("outcome", CHOICES["outcome"], key="dec_outcome", format_func=lambda v: v or "any")
c4.selectbox("violation (a constraint a candidate broke)", VIOLATIONS, key="dec_violation",
             format_func=lambda v: v or "any")
c5.text_input("min latency (ms)", key="dec_min_ms", placeholder="0")
c6.text_input("max latency (ms)", key="dec_max_ms", placeholder="∞")
with st.form("dec_query_form", border=False):
    q1, q2 = st.columns([4, 1], vertical_alignment="bottom")
    q1.text_input("query text (hashed here as the gateway hashes it; only the hash is sent)", key="dec_qtext",
                  type="password")
    q2.form_submit_button("Search by query", on_click=_hash_typed_query)
st.text_input("query hash", key="dec_qhash", placeholder="sha256:… or hmac-sha256:…")
st.columns([2, 3])[0].multiselect("empty (decisions without a rule, a model or an instance)", list(dec.UNSET_LABELS),
                                  key="dec_unset", format_func=dec.UNSET_LABELS.__getitem__, placeholder="none")
key_note = st.empty()

raw = {f: str(st.session_state[f"dec_{f}"]) for f in FIELDS} | {"unset": ",".join(st.session_state.dec_unset)}
signature = repr(sorted(raw.items())) + sc.window + repr(sc.trace_filter(start=None, end=None))
if st.session_state.get("dec_signature", signature) != signature:
    st.session_state.dec_pages = ""  # another search starts on its first page
st.session_state.dec_signature = signature
params, problems = dec.parse_search({**raw, "pages": st.session_state.dec_pages})
flt = sc.trace_filter()
problems += dec.scope_problems(flt) + (dec.unset_problems(flt, params) if params else [])
if params is None or problems:
    for field in (*FIELDS, "unset"):
        sync_param(dec.URL_KEYS[field], raw[field].strip() or None)
    st.warning(widgets.plain("Check the filters: " + "; ".join(problems)))
    st.stop()
url = dec.to_query(params)
for name in dec.URL_KEYS.values():
    sync_param(name, url.get(name))

try:
    page = resources.get_store().search(dec.search_filter(flt, params), limit=dec.PAGE_SIZE, cursor=params.cursor)
except BadCursor:
    st.session_state.dec_pages = ""
    sync_param("pages", None)
    st.warning("That page link is no longer valid: go back to the first page.")
    st.button("First page", key="dec_first")
    st.stop()
except SinkError as exc:
    st.error(widgets.plain(f"Trace source unreachable: {exc}"))
    st.stop()

key, key_env = dec.hash_key()
level, sentence = dec.key_note(key, key_env, [s.query_hash for s in page.items])
(key_note.warning if level == "warning" else key_note.caption)(widgets.plain(sentence))

number = len(params.pages) + 1
if not page.items:
    st.info("No decisions match." if number == 1 else "No more decisions on this page.")
else:
    more = ", more on the next page" if page.next_cursor else ""
    found = None
    try:
        found = fetch_violations(dec.search_filter(flt, params).model_dump_json(), page.model_dump_json(),
                                 tuple(sorted(c.name for c in lim.constraints)))
    except SinkError as exc:
        st.caption(widgets.plain(f"Violations not shown: {exc}"))
    rows = dec.rows_frame(page, found)
    st.caption(f"Page {number}: {count(len(page.items), 'decision')}{dec.describe(params)}{more}. "
               f"Cost in {lim.cost_unit}, latencies in ms.")
    if found is None:
        rows = rows.drop(columns="violations")
    with st.columns([1, 1])[0]:
        more = widgets.columns_input("more columns", {c: label for c, label in MORE.items() if c in rows.columns},
                                     key="dec_columns")
    styled = rows.style.map(dec.outcome_colour, subset=["outcome", "fallback"])
    # Columns size to their content (no fixed widths to clip them); the height holds every row.
    st.dataframe(styled, hide_index=True, key="dec_rows", width="stretch", placeholder=DASH,
                 column_order=[c for c in rows.columns if c != "request_id" and (c not in MORE or c in more)],
                 height=HEAD_PX + ROW_PX * max(len(rows), 1), row_height=ROW_PX, column_config={
        # The request id is the link's text (one column for both): the table fits without scrolling.
        "open": st.column_config.LinkColumn("request (why?)", display_text=r"request_id=(.+)$"),
        # Sized from the first rows otherwise: a long rule further down would be cut.
        "rule": st.column_config.TextColumn("rule", width="medium"),
        # With its date: a page may span days (the window, the pages before). Shown in UTC whatever
        # the zone the times came in (a store read in the machine's zone gave -04:00 ones).
        "ts": st.column_config.DatetimeColumn("time (UTC)", format="MM-DD HH:mm:ss", timezone="UTC"),
        "http": st.column_config.NumberColumn("http", format="%d"),
        "total_ms": st.column_config.NumberColumn("total", format="%.0f ms"),
        "decision_ms": st.column_config.NumberColumn("decision", format="%.2f ms"),
        "cost": st.column_config.NumberColumn("cost", format="%.3f", help=f"in {lim.cost_unit}"),
    })


def _go(pages: list[str]) -> None:
    st.session_state.dec_pages = ",".join(pages)


p1, p2, _ = st.columns([1, 1, 6])
p1.button("← previous", key="dec_prev", disabled=not params.pages, on_click=_go, args=(params.pages[:-1],))
p2.button("next →", key="dec_next", disabled=page.next_cursor is None or number > 99, on_click=_go,
          args=([*params.pages, page.next_cursor or ""],))
