import schemas

CONTRACT = {
    "DecisionTrace", "DecisionStep", "CandidateEval", "Violation", "Attempt", "Outcome",
    "ProbeResult", "InstanceSpec", "InstanceSnapshot", "RequestFeatures", "ScoreWeight", "LatchState",
}


def test_contract_models_are_exported() -> None:
    assert CONTRACT <= set(schemas.__all__)
    for name in schemas.__all__:
        assert hasattr(schemas, name), name


def test_trace_models_are_frozen_and_strict() -> None:
    for name in CONTRACT:
        cfg = getattr(schemas, name).model_config
        assert cfg.get("frozen") is True and cfg.get("extra") == "forbid", name
