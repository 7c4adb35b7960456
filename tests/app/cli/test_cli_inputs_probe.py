"""``probe`` and ``probes calibrate`` input: an unreachable instance is a failed probe; bad flags exit 2 at once."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from app.cli import main
from app.cli.probes import _table
from app.run.procs import free_port
from probes.references import Calibration


@pytest.fixture(autouse=True)
def _here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)  # no routelens.yaml here: default probe settings
    monkeypatch.delenv("NOSUCHVAR", raising=False)


def _one_error_line(err: str, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err


@pytest.mark.parametrize("model", [[], ["--model", "m"]])
def test_an_unreachable_instance_fails_the_probe_with_exit_1(model: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert main(["probe", url, "--kind", "syntax", *model]) == 1
    out = capsys.readouterr().out
    assert "failed" in out and "cannot connect" in out


def test_an_unreachable_instance_json_is_a_failed_result(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", f"http://127.0.0.1:{free_port()}", "--kind", "syntax", "--json", "--instance", "a"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert (doc["kind"], doc["instance"], doc["verdict"], doc["error_class"]) == ("syntax", "a", "failed", "connect")


@pytest.mark.parametrize("cmd", [["probe", "http://127.0.0.1:9"],
                                 ["probes", "calibrate", "--url", "http://127.0.0.1:9"]])
@pytest.mark.parametrize(("flags", "words"), [
    (["--timeout", "0"], ("--timeout", "above 0")),
    (["--timeout=-1"], ("--timeout", "above 0")),
    (["--api-key-env", "NOSUCHVAR"], ("--api-key-env", "NOSUCHVAR")),
])
def test_bad_flags_exit_2(cmd: list[str], flags: list[str], words: tuple[str, ...],
                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*cmd, *flags]) == 2
    captured = capsys.readouterr()
    _one_error_line(captured.err, *words)
    assert captured.out == ""


@pytest.mark.parametrize(("cmd", "flag"), [(["probe"], "URL"), (["probes", "calibrate", "--url"], "--url"),
                                           (["probes", "calibrate", "--url", "http://127.0.0.1:9", "--drifted-url"],
                                            "--drifted-url")])
@pytest.mark.parametrize(("url", "words"), [("notaurl", ("not an http:// or https:// URL",)),
                                            ("http://127.0.0.1:9/v1", ("ends in /v1", "without /v1"))])
def test_a_url_that_is_not_an_instances_base_url_is_bad_input(cmd: list[str], flag: str, url: str,
                                                              words: tuple[str, ...],
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 naming the URL, not exit 1 as an unhealthy instance (or a connection error to a wrong path)."""
    assert main([*cmd, url]) == 2
    captured = capsys.readouterr()
    _one_error_line(captured.err, flag, url, *words)
    assert captured.out == ""


def test_calibrate_zero_samples_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probes", "calibrate", "--url", "http://127.0.0.1:9", "--samples", "0"]) == 2
    _one_error_line(capsys.readouterr().err, "--samples")


def test_calibrate_checks_the_write_folder_before_the_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "nonexistent" / "x" / "y.yaml"
    assert main(["probes", "calibrate", "--url", "http://127.0.0.1:9", "--write", str(dest)]) == 2
    captured = capsys.readouterr()
    _one_error_line(captured.err, "--write", "y.yaml", "no such directory")
    assert captured.out == ""


def test_the_calibration_table_is_whole_at_80_columns() -> None:
    rows = [Calibration(reference=name, healthy_n=40, healthy_mean=0.9312, healthy_std=0.0123, healthy_min=0.9011,
                        healthy_p1=0.9020, drifted_n=20, drifted_max=0.4512, drifted_p99=0.4499, suggested=0.6761,
                        separation=0.4499)
            for name in ("photosynthesis-zh", "seed-ai-summary-zh", "capital-en")]
    console = Console(width=80, record=True, file=io.StringIO())
    console.print(_table(rows))
    text = console.export_text()
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80
    for figure in ("0.676", "0.450", "0.901", "0.451", "0.931±0.012", "seed-ai-summary-zh", "suggested", "separation"):
        assert figure in text, text
