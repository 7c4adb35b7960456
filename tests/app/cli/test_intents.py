import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "data/intents/routelens_routes.yaml"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", "intents", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_eval_json_last_line(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text(DEMO.read_text("utf-8"), "utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c, ensure_ascii=False) for c in [
        {"text": "Review the warranty clause in this contract", "expected": "contract"},
        {"text": "帮我写一个Python函数", "expected": "code"},
        {"text": "Solve 2x + 3 = 11", "expected": "math"},
        {"text": "zxqv wqpl", "expected": None}]) + "\n", "utf-8")
    proc = _run("eval", "--routes", str(routes), "--cases", str(cases), "--no-escalate", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(report) >= {"n", "accuracy", "abstain_recall", "false_abstain", "p50_ms", "p99_ms", "per_route"}
    assert report["n"] == 4 and report["paths"] == {"fast": 4} and report["settings"] == "defaults"
    print("demo eval:", report)


def test_eval_runs_with_the_configurations_intent_settings(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text(DEMO.read_text("utf-8"), "utf-8")
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"text": "Review the warranty clause in this contract", "expected": "contract"}\n', "utf-8")
    (tmp_path / "routelens.yaml").write_text(  # the router this config runs takes the fast path only
        'fleet: {instances: [{id: a, model: m, url: "http://127.0.0.1:9"}]}\n'
        "routing:\n  intents: {routes: routes.yaml, escalate: false}\n", "utf-8")
    proc = _run("eval", "--routes", str(routes), "--cases", str(cases), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["settings"] == "routelens.yaml: routing.intents" and report["embedding"] == "off"
    assert report["paths"] == {"fast": 1}
    (tmp_path / "routelens.yaml").write_text("routing: {}\n", "utf-8")  # a broken config names its file and field
    proc = _run("eval", "--routes", str(routes), "--cases", str(cases), "--json", cwd=tmp_path)
    assert proc.returncode == 2 and "routelens.yaml" in proc.stderr and "fleet" in proc.stderr


def test_bad_json_line_exits_2(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"text": "hi", "expected": null}\n{not json\n')
    proc = _run("eval", "--routes", str(DEMO), "--cases", str(cases), "--json", cwd=tmp_path)
    assert proc.returncode == 2 and "cases.jsonl:2" in proc.stderr


def test_missing_routes_file_exits_2(tmp_path: Path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text('{"text": "hi", "expected": null}\n')
    proc = _run("eval", "--routes", str(tmp_path / "nope.yaml"), "--cases", str(cases), cwd=tmp_path)
    assert proc.returncode == 2 and "nope.yaml" in proc.stderr


def test_add_appends_to_a_route(tmp_path: Path) -> None:
    routes = tmp_path / "routes.yaml"
    routes.write_text("a:\n  - one\n")
    extra = tmp_path / "extra.txt"
    extra.write_text("two\nthree\n")
    proc = _run("add", "b", str(extra), "--routes", str(routes), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert '"b":' in routes.read_text() and "three" in routes.read_text()
    assert _run("add", "b", str(tmp_path / "missing.txt"), "--routes", str(routes), cwd=tmp_path).returncode == 2


def test_add_without_routes_appends_to_the_configurations_routes(tmp_path: Path) -> None:
    (tmp_path / "cfg").mkdir()
    routes = tmp_path / "cfg" / "routes.yaml"
    routes.write_text("a:\n  - one\n")
    (tmp_path / "cfg" / "routelens.yaml").write_text(  # fast path only: nothing to refit
        'fleet: {instances: [{id: a, model: m, url: "http://127.0.0.1:9"}]}\n'
        "routing:\n  intents: {routes: routes.yaml, escalate: false}\n", "utf-8")
    extra = tmp_path / "extra.txt"
    extra.write_text("two\n")
    proc = _run("add", "b", str(extra), "--config", "cfg/routelens.yaml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "two" in routes.read_text() and str(routes) in proc.stderr
    assert not (tmp_path / "data").exists()  # not the shipped routes' path, taken from the working folder
