"""The semantic probe with the real MiniLM model against simulated instances, and calibration."""

from __future__ import annotations

import asyncio
import random
import threading

import aiohttp
import numpy as np
import pytest

from probes.baselines import BaselineStore
from probes.embedder import MiniLMEmbedder
from probes.references import Reference, calibrate, dump_references, load_references
from probes.runner import ProbeRunner
from probes.semantic import SemanticCheck
from probes.types import Target
from schemas.common import ProbeKind, ProbeVerdict
from schemas.config.probes import SEED_SUMMARY_PROMPT
from schemas.errors import ConfigError
from sim.corpus import compose_answer
from tests.probes.conftest import MODEL, fast_settings, serving, sim_app

REFS = load_references()


def _round(embedder, app, *, drift: bool = False, refs: list[Reference] | None = None):
    async def main():
        async with serving(app) as url, aiohttp.ClientSession() as session:
            if drift:
                async with session.post(f"{url}/admin/faults", json={"kind": "drift"}) as resp:
                    assert resp.status == 201
            runner = ProbeRunner(fast_settings(), session, embedder=embedder, baselines=BaselineStore(),
                                 references=refs)
            return await runner.run(ProbeKind.SEMANTIC, Target("sim-a", MODEL, url))

    return asyncio.run(main())


def test_packaged_references_have_the_seed_prompt_and_both_languages() -> None:
    assert REFS[0].prompt == SEED_SUMMARY_PROMPT and REFS[0].lang == "zh"
    langs = [r.lang for r in REFS]
    assert langs.count("zh") == 3 and 2 <= langs.count("en") <= 3


def test_healthy_instance_is_ok(embedder: MiniLMEmbedder) -> None:
    result = _round(embedder, sim_app())
    assert result.verdict is ProbeVerdict.OK and result.reason == ""
    assert result.value is not None and result.threshold is not None and result.value >= result.threshold
    assert result.reference in {r.id for r in REFS}


def test_drifting_instance_fails_naming_the_reference(embedder: MiniLMEmbedder) -> None:
    result = _round(embedder, sim_app(), drift=True)
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == "drift"
    assert result.value is not None and result.threshold is not None and result.value < result.threshold
    assert result.reason.startswith(f"answer drifted: similarity {result.value:.3f} to reference {result.reference}")


def test_a_broken_answer_fails_the_round_with_its_reason(embedder: MiniLMEmbedder) -> None:
    async def main():
        async with serving(sim_app()) as url, aiohttp.ClientSession() as session:
            async with session.post(f"{url}/admin/faults", json={"kind": "error"}) as resp:
                assert resp.status == 201
            runner = ProbeRunner(fast_settings(), session, embedder=embedder, baselines=BaselineStore())
            return await runner.run(ProbeKind.SEMANTIC, Target("sim-a", MODEL, url))

    result = asyncio.run(main())
    assert result.verdict is ProbeVerdict.FAILED and result.error_class == "http_status"
    assert result.reason.startswith(f"reference {REFS[0].id}: HTTP 500")


def _similarities(embedder: MiniLMEmbedder, verdict: str, n: int = 50) -> dict[str, list[float]]:
    """Answers of n simulated instances (different ids, as the sim seeds them) to every reference."""
    out = {}
    for ref in REFS:
        answers = [compose_answer(ref.prompt, random.Random(f"5\x1fsim-{i}\x1f{ref.prompt}"), 96, verdict).text  # type: ignore[arg-type]
                   for i in range(n)]
        out[ref.id] = [float(x) for x in embedder.embed(answers) @ embedder.embed([ref.answer])[0]]
    return out


def test_every_reference_separates_healthy_from_drifted_on_the_sim(embedder: MiniLMEmbedder) -> None:
    healthy, drifted = _similarities(embedder, "correct"), _similarities(embedder, "drift")
    for ref in REFS:
        threshold = ref.threshold if ref.threshold is not None else 0.65
        assert min(healthy[ref.id]) >= threshold + 0.05, ref.id
        assert max(drifted[ref.id]) <= threshold - 0.05, ref.id
    rows = {c.reference: c for c in calibrate(healthy, drifted)}
    assert set(rows) == {r.id for r in REFS}
    for c in rows.values():
        assert c.healthy_n == c.drifted_n == 50 and c.separation is not None and c.separation > 0.1
        assert c.drifted_p99 is not None and c.drifted_p99 < c.suggested < c.healthy_p1


def test_calibrate_without_drifted_samples() -> None:
    (c,) = calibrate({"r": [0.9, 0.92, 0.88, 0.91]})
    assert c.drifted_n == 0 and c.separation is None and c.drifted_max is None
    assert c.suggested == pytest.approx(min(0.9025 - 4 * np.std([0.9, 0.92, 0.88, 0.91]), 0.83), abs=1e-3)


def test_embeddings_are_cached_and_embedding_runs_off_the_loop() -> None:
    calls: list[tuple[int, str]] = []

    class Fake:
        def embed(self, texts: list[str]) -> np.ndarray:
            calls.append((len(texts), threading.current_thread().name))
            return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    async def main():
        async with serving(sim_app()) as url, aiohttp.ClientSession() as session:
            check = SemanticCheck(fast_settings(), Fake(), REFS)
            for _ in range(2):
                await check.run(session, Target("sim-a", MODEL, url))

    asyncio.run(main())
    # references once, answers once: the second round's answers are the same texts, served from the cache
    assert [n for n, _ in calls] == [len(REFS)] * 2
    assert all(name != threading.main_thread().name for _, name in calls)


def test_references_file_errors_name_the_field(tmp_path) -> None:
    bad = tmp_path / "refs.yaml"
    bad.write_text("- id: a\n  lang: fr\n  prompt: p\n  answer: x\n")
    with pytest.raises(ConfigError) as exc:
        load_references(bad)
    assert "refs.yaml:2: [0].lang: Input should be 'zh' or 'en'" in str(exc.value)
    bad.write_text(dump_references([REFS[0], REFS[0]]))
    with pytest.raises(ConfigError, match="duplicate reference ids"):
        load_references(bad)
    bad.write_text("- id: a\n  lang: en\n  prompt: p\n  answer: x\n  answer: y\n")  # YAML would keep y
    with pytest.raises(ConfigError, match="duplicate key 'answer'"):
        load_references(bad)


def test_dump_and_load_round_trip(tmp_path) -> None:
    path = tmp_path / "refs.yaml"
    path.write_text(dump_references(REFS, "calibrated\nfor a test"))
    assert load_references(path) == REFS and path.read_text().startswith("# calibrated\n# for a test\n")


def test_in_daemon_thread_returns_the_result_or_raises_the_error_and_its_thread_is_a_daemon() -> None:
    import threading

    from probes.semantic import in_daemon_thread

    seen: list[bool] = []

    def work(x: int) -> int:
        seen.append(threading.current_thread().daemon)
        if x < 0:
            raise ValueError("negative")
        return x * 2

    async def run() -> tuple[int, str]:
        ok = await in_daemon_thread(work, 21)
        try:
            await in_daemon_thread(work, -1)
        except ValueError as exc:
            return ok, str(exc)
        return ok, ""

    assert asyncio.run(run()) == (42, "negative")
    assert seen == [True, True]  # a stopping process never waits for it (unlike asyncio.to_thread's executor)
