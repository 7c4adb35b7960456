"""The behaviour model: built-in mix, warm-up, accuracy with the int4 maths penalty, expected model."""

from __future__ import annotations

import pytest

from schemas.config.sim import SimModelProfile
from sim.behaviour import BUILTIN_MODELS, builtin_config, expected_model, has_maths, p_correct, warmup_progress

INT4 = next(m.profile for m in BUILTIN_MODELS if m.profile.quantization == "int4")


def test_builtin_config_puts_instance_i_on_base_port_plus_i_with_the_mix():
    cfg = builtin_config(6, 9300)
    assert [s.url for s in cfg.fleet.instances] == [f"http://127.0.0.1:{9300 + i}" for i in range(6)]
    assert [s.model for s in cfg.fleet.instances][:5] == [m.name for m in BUILTIN_MODELS] + [BUILTIN_MODELS[0].name]
    assert set(cfg.sim.models) == {m.name for m in BUILTIN_MODELS}
    assert len({s.id for s in cfg.fleet.instances}) == 6
    assert builtin_config(2, 0).fleet.instances[1].url == "http://127.0.0.1:0"
    with pytest.raises(ValueError, match="between 1 and 256"):
        builtin_config(0, 9300)


def test_the_seeds_premium_model_warms_up_in_90_seconds():
    v4 = BUILTIN_MODELS[0].profile
    assert v4.warmup_s == 90
    assert [warmup_progress(v4, t) for t in (0, 45, 90, 500)] == [0.0, 0.5, 1.0, 1.0]
    assert warmup_progress(SimModelProfile(), 0) == 1.0


@pytest.mark.parametrize(("text", "maths"), [("求解方程 x^2 - 5x + 6 = 0", True), ("what is 3 + 4", True),
                                             ("∫ x dx", True), ("客户投诉手机银行登录后页面空白", False),
                                             ("Hello there", False)])
def test_has_maths(text, maths):
    assert has_maths(text) is maths


def test_int4_loses_28_percent_on_maths_only_and_cold_models_are_less_accurate():
    fp16 = INT4.model_copy(update={"quantization": "fp16"})
    maths, plain = "Solve the equation 3x + 7 = 25", "Classify this support ticket"
    assert p_correct(INT4, "math", maths) == pytest.approx(p_correct(fp16, "math", maths) * 0.72)
    assert p_correct(INT4, "ticket", plain) == p_correct(fp16, "ticket", plain)
    warm, cold = p_correct(fp16, "ticket", plain, 1.0), p_correct(fp16, "ticket", plain, 0.0)
    assert cold == pytest.approx(warm * fp16.cold_accuracy)


def test_expected_model_is_the_cheapest_adequate_one():
    profiles = {m.name: m.profile for m in BUILTIN_MODELS}
    assert expected_model("contract", "review these clauses", profiles) == "deepseek-v4-32k"
    assert expected_model("chat", "hello", profiles) == "default-7b-chat"
    # maths: the int4 coder would be cheap but the penalty makes it inadequate
    assert expected_model("math", "Solve 3x + 7 = 25", profiles) == "deepseek-coder-6b-fp16"
    assert expected_model("code", "x", {}) is None
