import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from router_core.intents.joint import JointModel, choose_neighbour_weight, embedding_weight
from tests.router_core.intents._fakes import FakeEmbedder

TEXTS = [f"please pay my {w} bill" for w in "water gas phone power rent card".split()] + \
        [f"what is the weather in {c}" for c in "paris rome oslo lima kyiv pune".split()] + \
        [f"play some {g} music" for g in "jazz rock pop folk soul funk".split()] + ["帮我交一下电费", "北京天气怎么样"]
LABELS = ["bill"] * 6 + ["weather"] * 6 + ["music"] * 6 + ["bill", "weather"]


@pytest.mark.parametrize(("text", "weight"), [("pay my bill", 1.0), ("帮我交电费", 0.5), ("交 gas 费", 1 - 0.5 * 2 / 5),
                                              ("12345", 1.0)])
def test_embedding_weight_halves_with_the_cjk_share(text: str, weight: float) -> None:
    assert embedding_weight(text) == pytest.approx(weight)


@pytest.mark.parametrize("routes", [3, 2], ids=["multinomial", "two routes"])
def test_score_one_is_sklearns_probability_on_the_joint_features(routes: int) -> None:
    keep = [i for i, lab in enumerate(LABELS) if lab in ("bill", "weather", "music")[:routes]]
    texts, labels = [TEXTS[i] for i in keep], [LABELS[i] for i in keep]
    emb = FakeEmbedder()
    vectors = emb.embed(texts)
    model = JointModel(seed=0).fit(texts, vectors, labels)
    # the same fit, through scikit-learn's own predict_proba
    grams = model._vec.transform(texts)
    weights = np.array([embedding_weight(t) for t in texts], dtype=np.float32)[:, None]
    ref = LogisticRegression(C=model.c, max_iter=3000, random_state=0).fit(
        sp.hstack([sp.csr_matrix(vectors * weights), grams]).tocsr(), labels)
    for query in ("pay the water bill", "weather in oslo tomorrow", "北京明天天气", "zzz"):
        v = emb.embed([query])
        x = sp.hstack([sp.csr_matrix(v * embedding_weight(query)), model._vec.transform([query])]).tocsr()
        proba = ref.predict_proba(x)[0]
        name, conf, p, cos = model.score_one(query, v[0])
        assert name == ref.classes_[proba.argmax()] and p == pytest.approx(proba.max(), abs=1e-4)  # float32 n-grams
        own = model.examples_of(name)
        assert cos == pytest.approx(float(np.clip((own @ v[0]).max(), 0, 1)), abs=1e-6)
        assert conf == pytest.approx(p * cos)


def _xor_routes() -> tuple[list[str], np.ndarray, list[str]]:
    """Two routes, each the union of two opposite clusters: no linear model separates them, nearest examples do."""
    rng = np.random.default_rng(3)
    centres = {"a": [(1.0, 0.0), (-1.0, 0.0)], "b": [(0.0, 1.0), (0.0, -1.0)]}
    texts, rows, labels = [], [], []
    for label, points in centres.items():
        for x, y in points:
            for _ in range(10):
                v = np.array([x, y, 0.3]) + rng.normal(0, 0.08, 3)
                rows.append(v / np.linalg.norm(v))
                texts.append("the same words")  # n-grams that say nothing of the route
                labels.append(label)
    return texts, np.asarray(rows, dtype=np.float32), labels


def test_parts_are_the_logit_score_one_takes() -> None:
    texts, vectors, labels = _xor_routes()
    model = JointModel(seed=0, neighbour_weight=7.0).fit(texts, vectors, labels)
    for text, v in (("the same words", vectors[5]), ("北京", vectors[25]), ("交 gas", vectors[12])):
        linear, neighbour = model.parts(text, v)
        nearest = [float((model.examples_of(r) @ v).max()) for r in model.labels]
        assert neighbour == pytest.approx(np.array(nearest) * (2 * embedding_weight(text) - 1), abs=1e-6)
        z = linear + 7.0 * neighbour
        p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        name, _, prob, cos = model.score_one(text, v)
        assert name == model.labels[int(p.argmax())] and prob == pytest.approx(p.max())
        assert cos == pytest.approx(max(0.0, nearest[int(p.argmax())]), abs=1e-6)


def test_chinese_text_takes_no_neighbour_term() -> None:
    texts, vectors, labels = _xor_routes()
    model = JointModel(seed=0).fit(texts, vectors, labels)
    assert not model.parts("北京天气", vectors[0])[1].any()


def test_the_weight_chosen_on_held_out_examples_carves_routes_that_are_unions() -> None:
    texts, vectors, labels = _xor_routes()
    train = [i for i in range(len(texts)) if i % 5]
    test = [i for i in range(len(texts)) if not i % 5]
    model = JointModel(seed=0).fit([texts[i] for i in train], vectors[train], [labels[i] for i in train])
    linear_right = sum(model.score_one(texts[i], vectors[i])[0] == labels[i] for i in test)
    weight = choose_neighbour_weight([(model, texts[i], vectors[i], labels[i]) for i in test])
    assert weight > 0
    model.neighbour_weight = weight
    assert sum(model.score_one(texts[i], vectors[i])[0] == labels[i] for i in test) == len(test) > linear_right


def test_the_linear_model_alone_is_kept_where_it_is_already_right() -> None:
    emb = FakeEmbedder()
    vectors = emb.embed(TEXTS)
    model = JointModel(seed=0).fit(TEXTS, vectors, LABELS)
    held = [("pay the gas bill", "bill"), ("weather in rome", "weather"), ("play jazz music", "music")]
    assert all(model.score_one(t, emb.embed([t])[0])[0] == r for t, r in held)
    assert choose_neighbour_weight([(model, t, emb.embed([t])[0], r) for t, r in held]) == 0.0


def test_models_fitted_on_the_same_texts_share_one_gram_row() -> None:
    from router_core.intents.fast import FastModel

    emb = FakeEmbedder()
    joint = JointModel(seed=0).fit(TEXTS, emb.embed(TEXTS), LABELS)
    fast = FastModel(0).fit(TEXTS, LABELS)
    assert fast.vocabulary == joint.vocabulary
    for query in ("pay the water bill", "北京明天天气", "zzz", ""):
        grams = fast.gram_row(query)
        v = emb.embed([query])[0]
        assert joint.score_one(query, v, grams) == joint.score_one(query, v)
        assert fast.score_one(query, grams) == fast.score_one(query)
    assert len(fast.gram_row("")[0]) == 0  # no known n-gram: no columns
