"""The ``probes:`` section of ``routelens.yaml``: synthetic probes, their verdicts and their alerts.

Seed 003 §4.2: every 30 s each instance gets three probes: a "Hello world" syntax check, a fixed
128-token prompt whose P50/P95 is judged against a learned baseline (±20%), and the seed's
summarisation prompt whose answer must stay within cosine 0.65 of a reference (all-MiniLM-L6-v2).
A verdict turns ``failed`` after ``fail_k`` of the last ``fail_n`` probes fail and back to ``ok``
only after ``recover_m`` passes in a row (the seed's "探针连续10次通过"). Nothing here is required.
"""

from __future__ import annotations

from typing import Annotated, Literal, Self

from pydantic import Field, model_validator

from schemas.common import ContractModel, ProbeKind, ProbeVerdict
from schemas.paths import InputFile, OutputPath

__all__ = [
    "AlertRule",
    "AlertSettings",
    "AlertWebhook",
    "LatencyProbeSettings",
    "ProbeHysteresis",
    "ProbeSettings",
    "SemanticProbeSettings",
    "SyntaxProbeSettings",
]

SEED_SUMMARY_PROMPT = (
    "请用一句话总结：人工智能是计算机科学的一个分支，它企图了解智能的实质，"
    "并生产出一种新的能以人类智能相似的方式做出反应的智能机器。"
)


class SyntaxProbeSettings(ContractModel):
    """The syntax probe: a 200, a body valid against OpenAI's CreateChatCompletionResponse, clean text."""

    prompt: str = Field("Hello world", min_length=1)
    max_tokens: int = Field(16, ge=1, le=4096)


class LatencyProbeSettings(ContractModel):
    """The latency probe: a fixed prompt, P50/P95 over a sliding window against a learned baseline."""

    prompt_tokens: int = Field(128, ge=1, le=32768, description="Length of the fixed prompt (estimated tokens).")
    max_tokens: int = Field(16, ge=1, le=4096)
    window: int = Field(10, ge=3, le=1000, description="Probes in the sliding window behind P50/P95.")
    baseline_probes: int = Field(10, ge=3, le=1000, description="Healthy probes that make a baseline.")
    tolerance: float = Field(0.2, gt=0, le=10, description="Off the baseline by more than this share: degraded.")
    trend_window: int = Field(8, ge=4, le=1000, description="Latest probes tested for a monotone creep.")
    trend_p: float = Field(0.01, gt=0, lt=1, description="Mann-Kendall p-value below which a rise is a trend.")
    trend_min_rise: float = Field(
        0.1, ge=0, description="A trend must also have risen by this share of the baseline over its window."
    )
    state_path: OutputPath | None = Field(
        None, description="Where learned baselines persist; default '<storage.duckdb_path>.probe-baselines.json'."
    )


class SemanticProbeSettings(ContractModel):
    """The semantic-fidelity probe: cosine similarity of answers to reference answers."""

    references: InputFile | None = Field(
        None, description="YAML file of references (prompt, answer, lang, threshold); default: the packaged set."
    )
    threshold: float = Field(0.65, ge=-1, le=1, description="Below it an answer is 'failed' (the seed's 0.65).")
    model: Literal["all-MiniLM-L6-v2"] = "all-MiniLM-L6-v2"
    max_tokens: int = Field(96, ge=1, le=4096)


class ProbeHysteresis(ContractModel):
    """k of the last n probes failing fail the verdict; m passes in a row restore it."""

    fail_k: int = Field(2, ge=1)
    fail_n: int = Field(3, ge=1)
    recover_m: int = Field(10, ge=1)

    @model_validator(mode="after")
    def _k_within_n(self) -> Self:
        if self.fail_k > self.fail_n:
            raise ValueError(f"fail_k ({self.fail_k}) must not exceed fail_n ({self.fail_n})")
        return self


class AlertRule(ContractModel):
    """When to fire: a probe verdict (``verdict``) or a measured value (``metric`` ``op`` ``threshold``).

    ``k``/``n``: the condition must hold in k of the last n results of an instance; ``for_s``: and
    for this long before it fires (Prometheus' ``for``). ``kind: watchdog`` fires when the prober
    itself has produced nothing for ``for_s`` seconds (silence is not health).
    """

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    kind: ProbeKind | Literal["watchdog"] | None = Field(None, description="None: results of any kind.")
    verdict: ProbeVerdict | None = None
    metric: Literal["value", "latency_ms"] | None = None
    op: Literal["<", "<=", ">", ">="] | None = None
    threshold: float | None = None
    for_s: float = Field(0.0, ge=0)
    k: int = Field(1, ge=1)
    n: int = Field(1, ge=1)
    severity: Literal["info", "warning", "critical"] = "warning"
    labels: dict[str, str] = {}
    summary: str = Field("", max_length=500)
    repeat_interval_s: float = Field(3600.0, gt=0, description="A still-firing alert is re-sent this often.")

    @model_validator(mode="after")
    def _one_condition(self) -> Self:
        if self.k > self.n:
            raise ValueError(f"k ({self.k}) must not exceed n ({self.n})")
        if self.kind == "watchdog":
            if self.verdict is not None or self.metric is not None:
                raise ValueError("a watchdog rule takes only for_s (how long the prober may be silent)")
            if self.for_s <= 0:
                raise ValueError("a watchdog rule needs for_s > 0")
            return self
        has_metric = self.metric is not None
        if has_metric != (self.op is not None) or has_metric != (self.threshold is not None):
            raise ValueError("metric, op and threshold go together")
        if has_metric == (self.verdict is not None):
            raise ValueError("a rule needs exactly one of: verdict, or metric/op/threshold")
        return self


class AlertWebhook(ContractModel):
    """A receiver of Alertmanager-format webhook notifications (Alertmanager, Slack or PagerDuty bridges)."""

    url: str = Field(pattern=r"^https?://")
    timeout_s: float = Field(5.0, gt=0)
    max_attempts: int = Field(8, ge=1, le=100, description="Delivery attempts before a notification is dropped.")
    backoff_s: float = Field(0.5, gt=0, description="First retry delay; doubles per attempt up to max_backoff_s.")
    max_backoff_s: float = Field(30.0, gt=0)
    bearer_token_env: str | None = Field(None, description="Environment variable with a bearer token to send.")


def _default_rules() -> list[AlertRule]:
    return [
        AlertRule(name="RouteLensProbeSemanticDrift", kind=ProbeKind.SEMANTIC, verdict=ProbeVerdict.FAILED,
                  severity="critical", summary="answers drifted from the references (cosine below threshold)"),
        AlertRule(name="RouteLensProbeSyntaxFailed", kind=ProbeKind.SYNTAX, verdict=ProbeVerdict.FAILED,
                  severity="critical", summary="invalid, empty or garbled answers to the syntax probe"),
        AlertRule(name="RouteLensProbeLatencyDegraded", kind=ProbeKind.LATENCY, verdict=ProbeVerdict.DEGRADED,
                  severity="warning", summary="probe latency off its baseline by more than the tolerance"),
        AlertRule(name="RouteLensProberSilent", kind="watchdog", for_s=120.0, severity="critical",
                  summary="the prober produced no result: silence is not health"),
    ]


class AlertSettings(ContractModel):
    """Alert rules over probe verdicts, and where notifications go."""

    rules: list[AlertRule] = Field(default_factory=_default_rules)
    webhooks: list[AlertWebhook] = []
    evaluate_every_s: float = Field(5.0, gt=0, description="How often rules (and the watchdog) are evaluated.")

    @model_validator(mode="after")
    def _unique_names(self) -> Self:
        names = [r.name for r in self.rules]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"alert rule names must be unique: {dupes}")
        return self


class ProbeSettings(ContractModel):
    """The prober: which probes, how often, how verdicts form and what alerts they raise."""

    enabled: bool = True
    interval_s: float = Field(30.0, ge=0.1, description="Every instance gets each probe once per interval.")
    jitter: float = Field(0.1, ge=0, le=1, description="Random shift of each slot, as a share of the slot's width.")
    timeout_s: float = Field(10.0, gt=0, description="One probe request, connect to last byte.")
    max_concurrent: Annotated[int, Field(ge=1, le=1024)] | Literal["auto"] = Field(
        "auto", description="Probes in flight at most (a semantic round of n references is one probe of n requests). "
        "auto: 16 at first, raised at each period's start to 1.5 times what the period needs from the probes' "
        "recent times, up to 256 (200 instances need about 20; docs/deployment.md, A big fleet). A number is "
        "kept as it is, and a period needing more is logged ('probes cannot keep up').",
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Longer answers are cut and fail the probe.")
    kinds: list[ProbeKind] = Field(default_factory=lambda: list(ProbeKind))
    marker_header: str = Field("x-routelens-probe", min_length=1, description="Sent with every probe request.")
    follow_url: str | None = Field(
        None, pattern=r"^https?://",
        description="Take verdicts from the prober at this URL (GET /v1/probes/verdicts) instead of probing.",
    )
    syntax: SyntaxProbeSettings = SyntaxProbeSettings()
    latency: LatencyProbeSettings = LatencyProbeSettings()
    semantic: SemanticProbeSettings = SemanticProbeSettings()
    hysteresis: ProbeHysteresis = ProbeHysteresis()
    alerts: AlertSettings = AlertSettings()
