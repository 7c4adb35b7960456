import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression

from router_core.intents.joint import JointModel, embedding_weight
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
