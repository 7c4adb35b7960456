import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from app.cli import main


def test_schema_json_is_the_trace_contract(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--json"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "DecisionTrace"
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "query_hash" in schema["properties"] and "query" not in schema["properties"]


def test_output_piped_into_a_reader_that_stops_early_ends_quietly() -> None:
    """``routelens schema --arrow | head -1``: the reader is gone before the first write."""
    with subprocess.Popen([sys.executable, "-m", "app", "schema", "--arrow"], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, cwd=Path(__file__).resolve().parents[3]) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # the command still imports: its every write meets a closed pipe
        err = proc.stderr.read().decode()
        code = proc.wait(60)
    assert code == 1 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_a_malformed_config_names_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("fleet:\n  instances:\n    - id: a\n      model: m\n      url: localhost:9000\n")
    assert main(["serve", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:5: fleet.instances[0].url" in err.replace("\n", "")


def test_a_missing_config_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--config", str(tmp_path / "nope.yaml"), "sim", "fleet"]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_a_config_error_is_printed_as_written_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A pattern's [a-z0-9] was read as console markup and dropped ('^*$'), and long lines were broken at 80."""
    bad = tmp_path / ("a-long-folder-name-" * 4) / "bad.yaml"
    bad.parent.mkdir()
    bad.write_text("fleet: {instances: [{id: a, model: m, url: 'http://127.0.0.1:9'}]}\n"
                   "storage:\n  elasticsearch: {url: 'http://127.0.0.1:9200', prefix: 'Bad Prefix'}\n")
    assert main(["--config", str(bad), "store"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert f"{bad}:3: storage.elasticsearch.prefix: String should match pattern '^[a-z0-9][a-z0-9_-]*$'" in lines


@pytest.mark.parametrize("argv", [["trace", "req_x"], ["probe", "http://127.0.0.1:9"], ["ingest", "import", "x.jsonl"],
                                  ["sim", "traffic", "--duration", "1"]])
def test_a_config_file_named_but_missing_is_refused_by_every_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """trace, replay, ingest, probe, intents and sim read routelens.yaml only when it is there: a --config naming a
    file that is not went on without it, on defaults (ingest into .routelens/traces.duckdb of the working folder)."""
    missing = tmp_path / "nope.yaml"
    for order in (["--config", str(missing), *argv], [*argv, "--config", str(missing)]):
        assert main(order) == 2
        err = capsys.readouterr().err
        assert f"{missing}: cannot read" in err and "(--config)" in err
    assert not (tmp_path / ".routelens").exists()
