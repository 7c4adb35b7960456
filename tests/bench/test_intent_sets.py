"""``python -m bench intents`` builds its sets as issue 32 describes: examples from one part, cases from another."""

from __future__ import annotations

import json
from pathlib import Path

from bench.intent_sets import clinc_set, mmlu_set, tnews_set, write_set


def _clinc(tmp: Path) -> Path:
    domains = {f"d{d}": [f"d{d}i{i}" for i in range(3)] for d in range(10)}
    rows = {part: [[f"{part} {intent} {k}", intent] for ints in domains.values() for intent in ints for k in range(n)]
            for part, n in (("train", 25), ("test", 20))}
    rows["oos_test"] = [[f"oos {k}", "oos"] for k in range(300)]
    (tmp / "data_full.json").write_text(json.dumps(rows))
    (tmp / "domains.json").write_text(json.dumps(domains))
    return tmp


def test_clinc_routes_are_domains_of_train_examples_and_cases_come_from_test(tmp_path: Path) -> None:
    routes, cases = clinc_set(_clinc(tmp_path), seed=1)
    assert sorted(routes) == [f"d{d}" for d in range(10)] and all(len(v) == 60 for v in routes.values())
    assert all(t.startswith(f"train {d}i") for d, ts in routes.items() for t in ts)  # a domain spans its intents
    assert {t.split()[1][:-2] for t in routes["d3"]} == {"d3"} and len({t.split()[1] for t in routes["d3"]}) == 3
    in_scope = [(t, e) for t, e in cases if e is not None]
    assert len(in_scope) == 500 and all(t.startswith(f"test {e}i") for t, e in in_scope)
    assert sum(e is None for _, e in cases) == 200
    assert clinc_set(tmp_path, seed=1) == (routes, cases) != clinc_set(tmp_path, seed=2)


def test_mmlu_takes_six_to_nine_examples_and_disjoint_cases(tmp_path: Path) -> None:
    path = tmp_path / "q.json"
    questions = [{"question": f" {c} q{k} ", "category": c} for c in ("law", "math") for k in range(50)]
    path.write_text(json.dumps(questions))
    routes, cases = mmlu_set(path, seed=3)
    assert all(6 <= len(v) <= 9 for v in routes.values()) and len(cases) == 60
    assert not {t for v in routes.values() for t in v} & {t for t, _ in cases}
    assert all(t.startswith(e) for t, e in cases)


def test_tnews_examples_from_dev_cases_from_test_and_written_as_eval_reads_them(tmp_path: Path) -> None:
    for part in ("dev", "test"):
        (tmp_path / f"{part}.json").write_text("".join(
            json.dumps({"sentence": f"{part}{c}{k}", "label_desc": c}, ensure_ascii=False) + "\n"
            for c, n in (("体育", 50), ("股票", 10)) for k in range(n)))
    built = tnews_set(tmp_path, seed=1)
    routes, cases = built
    assert len(routes["体育"]) == 40 and len(routes["股票"]) == 10  # a small class gives all it has
    assert all(t.startswith("dev") for v in routes.values() for t in v) and all(t.startswith("test") for t, _ in cases)
    routes_path, cases_path = write_set(tmp_path, "t", built)
    from app.cli.intents import read_cases
    from router_core.intents import load_routes

    assert read_cases(str(cases_path)) == cases and load_routes(routes_path) == routes
