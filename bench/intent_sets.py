"""Intent routing on public sets of the shapes issue 32 names, built from sources the project does not vendor.

``python -m bench intents --clinc DIR --mmlu-pro FILE --tnews DIR [--seeds 1,2] [--methods joint,centroids,fast]
[--out DIR]`` builds, for each source given and each seed, a routes file (``route: [utterances]``) and a
cases file (``{"text", "expected"}``) the way the issue describes its sets (the examples of each route
from one part of a public set, the cases from another), then runs ``routelens intents eval`` on them
with each method (:func:`app.cli.intents.run_eval`):

- ``clinc10x60``: CLINC150 (github.com/clinc/oos-eval, ``data/data_full.json`` and ``data/domains.json``,
  CC BY 3.0): its 10 domains as routes, 60 examples each drawn from the train split across the domain's
  15 intents; cases 50 test-split queries a domain and 200 of its out-of-scope test queries (expected null).
- ``mmlu14``: MMLU-Pro's 14 categories (law, health, economics, ..., other; github.com/TIGER-AI-Lab/MMLU-Pro,
  MIT; any JSON list of its test questions with ``question`` and ``category``, such as the model
  outputs under its ``eval_results/``): 6-9 questions a category as examples, 30 others as cases.
- ``tnews15x40``: CLUE's TNEWS (15 classes of Toutiao news headlines, JSON lines with ``sentence`` and
  ``label_desc``; ``dev.json`` and ``test.json``): 40 dev headlines a class as examples (all of a class
  with fewer), 40 test headlines a class as cases.

Nothing here is tuned to these sets, and they are not a development set: they measure item 1 of the
issue. Last line: ``{"sets": {NAME: {METHOD: {"accuracy", "abstain_recall", "false_abstain", "p50_ms",
"p99_ms", "fit_s", "neighbour_weight"}}}, "mean": {FAMILY: {METHOD: accuracy}}, "targets": {FAMILY: accuracy}}``.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from router_core.intents.routes import dump_routes

__all__ = ["clinc_set", "main", "mmlu_set", "tnews_set", "write_set"]

Cases = list[tuple[str, str | None]]
Built = tuple[dict[str, list[str]], Cases]
TARGETS = {"clinc10x60": 0.93, "mmlu14": 0.80, "tnews15x40": 0.60}  # issue 32, item 1


def clinc_set(folder: Path, seed: int, per_route: int = 60, per_case: int = 50, oos: int = 200) -> Built:
    """CLINC150's domains as routes: train-split examples, test-split cases and out-of-scope queries."""
    data = json.loads((folder / "data_full.json").read_text("utf-8"))
    domains: dict[str, list[str]] = json.loads((folder / "domains.json").read_text("utf-8"))
    domain_of = {intent: d for d, intents in domains.items() for intent in intents}
    rng = random.Random(seed)
    split: dict[str, dict[str, list[str]]] = {"train": defaultdict(list), "test": defaultdict(list)}
    for part, rows in split.items():
        for text, intent in data[part]:
            if intent in domain_of:
                rows[domain_of[intent]].append(text)
    routes = {d: rng.sample(sorted(split["train"][d]), per_route) for d in sorted(domains)}
    cases: Cases = [(t, d) for d in sorted(domains) for t in rng.sample(sorted(split["test"][d]), per_case)]
    cases += [(t, None) for t in rng.sample(sorted(t for t, _ in data["oos_test"]), oos)]
    return routes, cases


def mmlu_set(path: Path, seed: int, per_case: int = 30) -> Built:
    """MMLU-Pro's categories as routes: 6-9 questions each as examples, ``per_case`` others as cases."""
    by: dict[str, set[str]] = defaultdict(set)
    for q in json.loads(path.read_text("utf-8")):
        by[q["category"]].add(q["question"].strip())
    rng = random.Random(seed)
    routes: dict[str, list[str]] = {}
    cases: Cases = []
    for category in sorted(by):
        pool = sorted(by[category])
        rng.shuffle(pool)
        k = rng.randint(6, 9)
        routes[category] = pool[:k]
        cases += [(t, category) for t in pool[k:k + per_case]]
    return routes, cases


def tnews_set(folder: Path, seed: int, per_route: int = 40, per_case: int = 40) -> Built:
    """TNEWS's classes as routes: dev-split headlines as examples, test-split ones as cases."""
    def read(name: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = defaultdict(list)
        for line in (folder / name).read_text("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["label_desc"]].append(row["sentence"])
        return out

    dev, test = read("dev.json"), read("test.json")
    rng = random.Random(seed)
    routes = {c: rng.sample(sorted(dev[c]), min(per_route, len(dev[c]))) for c in sorted(dev)}
    cases: Cases = [(t, c) for c in sorted(test) for t in rng.sample(sorted(test[c]), min(per_case, len(test[c])))]
    return routes, cases


def write_set(folder: Path, name: str, built: Built) -> tuple[Path, Path]:
    """Write ``name``'s routes YAML and cases JSONL into ``folder``; return their paths."""
    routes, cases = built
    routes_path, cases_path = folder / f"{name}_routes.yaml", folder / f"{name}_cases.jsonl"
    routes_path.write_text(dump_routes(routes), "utf-8")
    cases_path.write_text("".join(json.dumps({"text": t, "expected": e}, ensure_ascii=False) + "\n"
                                  for t, e in cases), "utf-8")
    return routes_path, cases_path


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench intents", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--clinc", type=Path, help="CLINC150's data folder (data_full.json, domains.json)")
    p.add_argument("--mmlu-pro", type=Path, help="a JSON list of MMLU-Pro questions (question, category)")
    p.add_argument("--tnews", type=Path, help="TNEWS's folder (dev.json, test.json)")
    p.add_argument("--seeds", default="1,2", help="one set of each shape per seed")
    p.add_argument("--methods", default="joint,centroids,fast")
    p.add_argument("--out", type=Path, help="keep the built sets here (default: a temporary folder)")
    args = p.parse_args(argv)
    builders: dict[str, Callable[[int], Built]] = {}
    if args.clinc:
        builders["clinc10x60"] = lambda s: clinc_set(args.clinc, s)
    if args.mmlu_pro:
        builders["mmlu14"] = lambda s: mmlu_set(args.mmlu_pro, s)
    if args.tnews:
        builders["tnews15x40"] = lambda s: tnews_set(args.tnews, s)
    if not builders:
        p.error("give at least one of --clinc, --mmlu-pro, --tnews")
    from app.cli.intents import run_eval

    seeds = [int(s) for s in args.seeds.split(",")]
    methods = args.methods.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        sets: dict[str, dict[str, dict[str, Any]]] = {}
        for family, build in builders.items():
            for seed in seeds:
                name = f"{family}_s{seed}"
                routes_path, cases_path = write_set(folder, name, build(seed))
                for method in methods:
                    r = run_eval(str(routes_path), str(cases_path), method=method)
                    row = {k: r[k] for k in ("accuracy", "abstain_recall", "false_abstain", "p50_ms", "p99_ms",
                                             "fit_s")}
                    row["neighbour_weight"] = (r.get("calibration") or {}).get("neighbour_weight")
                    sets.setdefault(name, {})[method] = row
                    print(f"{name} {method}: {json.dumps(row)}", flush=True)
    mean = {f: {m: round(sum(sets[f"{f}_s{s}"][m]["accuracy"] for s in seeds) / len(seeds), 4) for m in methods}
            for f in builders}
    print(json.dumps({"sets": sets, "mean": mean, "targets": {f: TARGETS[f] for f in builders}}))
    return 0
