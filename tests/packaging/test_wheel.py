"""What the wheel holds: every file our packages read, the compiled extensions, and honest metadata."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import shutil
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.packaging.wheel_kit import ROOT, Installed

pytestmark = pytest.mark.slow

PACKAGES = ("schemas", "router_core", "ingest", "probes", "app", "sim", "bench")
EXTENSIONS = ("ingest.codec._ndjson_arrow", "ingest.otel._otlp_wire")
_REQUIREMENT = re.compile(r"^Requires-Dist:\s*([A-Za-z0-9._-]+)(?:\[[^\]]*\])?(.*)$", re.M)
_EXTRA = re.compile(r"extra\s*==\s*['\"]([^'\"]+)['\"]")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_file_of_our_packages_is_in_the_wheel(source: Path, installed: Installed) -> None:
    # SQL, YAML, JSON, stubs, C sources: whatever git holds inside a package is read by it or built from it
    names = set(installed.names())
    tracked = [p for p in source.rglob("*") if p.is_file() and p.relative_to(source).parts[0] in PACKAGES
               and "__pycache__" not in p.parts and not p.name.endswith((".so", ".pyc"))]
    assert len(tracked) > 100, "the clone holds our packages"
    missing = sorted(str(p.relative_to(source)) for p in tracked if str(p.relative_to(source)) not in names)
    assert not missing, f"in a package, not in the wheel (pyproject.toml [tool.setuptools.package-data]): {missing}"


@pytest.mark.skipif(shutil.which(str(sysconfig.get_config_var("CC") or "cc").split()[0]) is None,
                    reason="no C compiler here: the wheel is built without its extensions (see the no-compiler test)")
def test_the_wheel_holds_the_compiled_extensions(installed: Installed) -> None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    names = set(installed.names())
    for module in EXTENSIONS:
        assert module.replace(".", "/") + suffix in names, f"{module} was not compiled into the wheel"


def test_the_version_is_the_projects(installed: Installed, empty_folder: Path) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    assert re.search(r"^Version: (\S+)$", installed.metadata(), re.M)[1] == project  # type: ignore[index]
    done = installed.run(["-m", "app", "--version"], cwd=empty_folder)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["routelens", project]


def _third_party_imports(wheel: Path) -> dict[str, set[str]]:
    """Top-level module -> the wheel's files importing it, for every module neither ours nor the stdlib's."""
    found: dict[str, set[str]] = {}
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.endswith(".py"):
                continue
            for node in ast.walk(ast.parse(z.read(name), filename=name)):
                if isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules = [node.module]
                else:
                    continue
                for module in modules:
                    top = module.split(".")[0]
                    if top not in PACKAGES and top not in sys.stdlib_module_names and top != "__future__":
                        found.setdefault(top, set()).add(name)
    return found


def test_every_import_in_the_wheel_is_a_declared_requirement(installed: Installed) -> None:
    declared: dict[str, str] = {}  # distribution -> "base" or its extra
    for dist, marker in _REQUIREMENT.findall(installed.metadata()):
        extra = _EXTRA.search(marker)
        declared.setdefault(_normalise(dist), extra[1] if extra else "base")
    providers = importlib.metadata.packages_distributions()
    imports = _third_party_imports(installed.wheel)
    assert {"pydantic", "duckdb", "aiohttp"} <= set(imports), "the scan sees our imports"
    undeclared = {}
    for module, files in sorted(imports.items()):
        dists = {_normalise(d) for d in providers.get(module, [])}
        if not dists & set(declared):
            undeclared[module] = (sorted(dists) or "not installed here", sorted(files)[:3])
    assert not undeclared, f"imported by the wheel, in no Requires-Dist of its METADATA: {undeclared}"


def test_the_development_extras_are_not_needed_by_the_package(installed: Installed) -> None:
    # dev's libraries are for tests/; shipped code importing one fails on a plain install
    requirements = _REQUIREMENT.findall(installed.metadata())
    dev = {_normalise(d) for d, marker in requirements if "dev" in _EXTRA.findall(marker)}
    others = {_normalise(d) for d, marker in requirements if "dev" not in _EXTRA.findall(marker)}
    providers = importlib.metadata.packages_distributions()
    dev_only = {}
    for module, files in _third_party_imports(installed.wheel).items():
        dists = {_normalise(d) for d in providers.get(module, [])}  # a namespace (opentelemetry) has several
        if dists & dev and not dists & others:
            dev_only[module] = sorted(files)[:3]
    assert not dev_only, f"shipped code imports a library only the dev extra declares: {dev_only}"
