"""The simulator answers the semantic probe's reference prompts: paraphrases when healthy, off-topic under drift."""

from __future__ import annotations

import random

import pytest

from probes.references import load_references
from sim.corpus import compose_answer, detect_lang, reference_answer
from sim.corpus_data import REFERENCE_DRIFT, REFERENCE_PARAPHRASES

REFS = load_references()


@pytest.mark.parametrize("ref", REFS, ids=[r.id for r in REFS])
def test_every_packaged_reference_is_known_to_the_sim(ref) -> None:
    assert ref.prompt in REFERENCE_PARAPHRASES
    answer = reference_answer(ref.prompt, random.Random(1))
    assert answer in REFERENCE_PARAPHRASES[ref.prompt] and detect_lang(answer) == ref.lang


@pytest.mark.parametrize("ref", REFS, ids=[r.id for r in REFS])
def test_drift_is_fluent_off_topic_text_in_the_same_language(ref) -> None:
    answer = compose_answer(ref.prompt, random.Random(2), 96, "drift")
    assert answer.text not in REFERENCE_PARAPHRASES[ref.prompt] and detect_lang(answer.text) == ref.lang
    assert any(sentence in answer.text for sentence in REFERENCE_DRIFT[ref.lang])


def test_paraphrases_are_chosen_by_the_seeded_rng() -> None:
    prompt = REFS[0].prompt
    picks = [reference_answer(prompt, random.Random(f"5\x1fsim-{i}")) for i in range(40)]
    assert picks == [reference_answer(prompt, random.Random(f"5\x1fsim-{i}")) for i in range(40)]
    assert set(picks) == set(REFERENCE_PARAPHRASES[prompt])


def test_a_reference_answer_respects_max_tokens() -> None:
    answer = compose_answer(REFS[0].prompt, random.Random(3), 5, "correct")
    assert answer.tokens <= 5 and answer.finish_reason == "length"


def test_other_prompts_are_answered_as_before() -> None:
    assert reference_answer("How are you doing today?", random.Random(4)) is None
