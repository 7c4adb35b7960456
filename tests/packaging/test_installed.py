"""The installed package, run from a user's own folder: what the README's commands need is there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.packaging.wheel_kit import Installed

pytestmark = pytest.mark.slow

# Files the installed code finds beside its own modules (module, attribute holding the path).
SHIPPED_PATHS = [
    pytest.param("app.ui", "ENTRYPOINT", id="app-entrypoint"),
    pytest.param("probes.references", "DEFAULT_REFERENCES", id="probe-references"),
    pytest.param("probes.contracts", "RESPONSE_SCHEMA_PATH", id="response-schema"),
    pytest.param("app.run.demo_day", "DEFAULT_SCRIPT", id="demo-day"),  # was data/demo/day.yaml: not installed
]


def test_the_command_answers_from_an_empty_folder(installed: Installed, empty_folder: Path) -> None:
    done = installed.run(["-m", "app", "--help"], cwd=empty_folder)
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout and "serve" in done.stdout
    plugins = installed.run(["-m", "app", "plugins"], cwd=empty_folder)
    assert plugins.returncode == 0, plugins.stderr
    assert {"type", "extension_point"} <= set(json.loads(plugins.stdout)[0])
    where = installed.run(["-c", "import app, ingest; print(app.__file__); print(ingest.__file__)"], cwd=empty_folder)
    assert all(Path(f).is_relative_to(installed.site) for f in where.stdout.split()), where.stdout + where.stderr


def test_without_a_config_the_commands_say_so(installed: Installed, empty_folder: Path) -> None:
    done = installed.run(["-m", "app", "serve"], cwd=empty_folder)
    assert done.returncode == 2
    assert done.stderr == f"error: no routelens.yaml in {empty_folder}; --config FILE names another\n"


@pytest.mark.parametrize(("module", "attribute"), SHIPPED_PATHS)
def test_the_files_the_code_names_beside_itself_are_installed(installed: Installed, empty_folder: Path,
                                                              module: str, attribute: str) -> None:
    done = installed.run(["-c", f"import {module} as m; print(m.{attribute})"], cwd=empty_folder)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.is_relative_to(installed.site), f"{module}.{attribute} = {path}: outside the installed package"
    assert path.is_file(), f"{module}.{attribute} = {path}: not installed"


def test_the_app_runs_the_installed_code_from_a_folder_holding_an_app_package(installed: Installed,
                                                                           empty_folder: Path) -> None:
    # A platform team's own service is often a package named app; `routelens app` run beside it must not
    # import it in place of ours (every page failed: "cannot import name 'reader' from 'app'").
    (empty_folder / "app").mkdir()
    (empty_folder / "app" / "__init__.py").write_text('"""the user\'s own app"""\n')
    captured = empty_folder / "argv.json"
    capture = ("import json, os, sys\n"
               f"os.execve = lambda exe, argv, env: (open({str(captured)!r}, 'w').write(json.dumps(argv)), "
               "sys.exit(0))\n"
               "from app.cli import main\n"
               "main(['app', '--db', 'traces.duckdb', '--port', '18599'])\n")
    # the CLI itself runs with -P (as the console script does: no working folder on its path)
    done = installed.run(["-c", capture], cwd=empty_folder)
    assert done.returncode == 0 and captured.is_file(), done.stderr
    argv = json.loads(captured.read_text())
    flags = argv[1:argv.index("-m")]  # the interpreter's options before `-m streamlit`
    probe = installed.run([*flags, "-c", "import app; print(app.__file__)"], cwd=empty_folder, safe_path=False)
    assert probe.returncode == 0, probe.stderr
    assert Path(probe.stdout.strip()).is_relative_to(installed.site), f"Streamlit would import {probe.stdout}"


def test_without_a_compiler_the_package_installs_and_falls_back(installed_without_compiler: Installed,
                                                               empty_folder: Path) -> None:
    assert not [n for n in installed_without_compiler.names() if n.endswith(".so")]
    code = ("import ingest.codec.fast_decoder as d, ingest.otel.wire as w\n"
            "from ingest.codec.to_arrow import parse_payloads\n"
            "print(d.AVAILABLE, w.FAST, d.__file__)\n")
    done = installed_without_compiler.run(["-c", code], cwd=empty_folder)
    assert done.returncode == 0, done.stderr
    available, fast, where = done.stdout.split()
    assert (available, fast) == ("False", "False")
    assert Path(where).is_relative_to(installed_without_compiler.site)
    schema = installed_without_compiler.run(["-m", "app", "schema", "--arrow"], cwd=empty_folder)
    assert schema.returncode == 0 and "request_id" in schema.stdout, schema.stderr
