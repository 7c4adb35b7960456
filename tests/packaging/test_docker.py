"""The Dockerfile and its build context, read as Docker reads them (no Docker engine runs here).

.dockerignore patterns are matched the way Docker's pattern matcher does: from the context's root,
``*`` and ``?`` within one path segment, ``**`` across any number of them, and a path is left out
when it or a folder above it matches.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.config import load_config
from tests.packaging.wheel_kit import ROOT

PACKAGES = ("schemas", "router_core", "ingest", "probes", "app", "sim", "bench")
_CONTINUED = re.compile(r"\\\n")


def _pattern(text: str) -> re.Pattern[str]:
    text = text.strip().lstrip("/").rstrip("/")
    out, i = "", 0
    while i < len(text):
        if text.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif text.startswith("**", i):
            out, i = out + ".*", i + 2
        elif text[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif text[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(text[i]), i + 1
    return re.compile(f"^{out}$")


def _lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text("utf-8").splitlines() if line.strip()
            and not line.lstrip().startswith("#")]


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker leaves ``path`` (relative to the context) out of the build context."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for raw in patterns:
        negated = raw.startswith("!")
        regex = _pattern(raw[1:] if negated else raw)
        if any(regex.match(p) for p in prefixes):
            excluded = not negated
    return excluded


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = _CONTINUED.sub(" ", dockerfile.read_text("utf-8"))
    out = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            keyword, _, rest = line.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _final_stage() -> list[tuple[str, str]]:
    steps = _instructions(ROOT / "Dockerfile")
    last_from = max(i for i, (k, _) in enumerate(steps) if k == "FROM")
    return steps[last_from:]


def _compose_routelens() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text("utf-8"))
    routelens: dict[str, Any] = data["x-routelens"]
    return routelens


def test_the_build_context_leaves_out_what_git_ignores() -> None:
    patterns = _lines(ROOT / ".dockerignore")
    samples = []
    for raw in _lines(ROOT / ".gitignore"):
        if raw.startswith("!"):
            continue
        name = raw.strip("/").replace("*", "x")
        samples.append(name)
        if "/" not in raw.rstrip("/"):  # git matches it in any folder
            samples.append(f"ingest/codec/{name}")
    present = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-oi", "--exclude-standard", "--directory"],
                             capture_output=True, text=True, timeout=60).stdout.split()
    kept = [p for p in samples + present if not dockerignored(p, patterns)]
    assert not kept, f"git ignores these, the image build would copy them: {kept}"


def test_the_matcher_reads_patterns_as_docker_does() -> None:
    assert dockerignored("a.so", ["*.so"]) and not dockerignored("ingest/codec/a.so", ["*.so"])
    assert dockerignored("ingest/codec/a.so", ["**/*.so"]) and dockerignored("a.so", ["**/*.so"])
    assert dockerignored(".venv/bin/python", [".venv/"]) and not dockerignored(".venv-phoenix/x", [".venv/"])
    assert not dockerignored("ingest/otel/build.py", ["**/build/"])


def test_the_context_keeps_every_file_the_image_copies() -> None:
    patterns = _lines(ROOT / ".dockerignore")
    tracked = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True,
                             timeout=60).stdout.split()
    sources = [arg for keyword, rest in _instructions(ROOT / "Dockerfile") if keyword == "COPY"
               and "--from" not in rest for arg in rest.split()[:-1]]
    assert "pyproject.toml" in sources and "app/" in sources
    for source in sources:
        files = [f for f in tracked if f == source or f.startswith(source.rstrip("/") + "/")]
        assert files, f"COPY {source}: nothing tracked there"
        dropped = [f for f in files if dockerignored(f, patterns)]
        assert not dropped, f"COPY {source}: .dockerignore leaves out {dropped[:5]}"


def test_the_image_runs_as_an_unprivileged_user() -> None:
    users = [rest.split(":")[0] for keyword, rest in _final_stage() if keyword == "USER"]
    assert users, "the final stage has no USER: the processes run as root"
    assert users[-1] not in {"root", "0"}


def test_the_traces_folder_is_the_compose_volume_and_the_user_owns_it() -> None:
    stage = _final_stage()
    workdir = [rest for keyword, rest in stage if keyword == "WORKDIR"][-1]
    user = [rest for keyword, rest in stage if keyword == "USER"][-1]
    # the compose configs keep their data in ../.routelens from deploy/: the traces volume at WORKDIR/.routelens
    volume = next(v.split(":")[1] for v in _compose_routelens()["volumes"] if v.startswith("traces:"))
    assert Path(volume) == Path(workdir) / ".routelens"
    runs = " ".join(rest for keyword, rest in stage if keyword == "RUN")
    assert re.search(rf"chown {re.escape(user)} \.routelens", runs), f"{volume} is not made {user}'s"


def test_the_image_exposes_the_ports_the_compose_config_serves() -> None:
    config = load_config(ROOT / "deploy/routelens.compose.yaml")
    exposed = {p.split("/")[0] for keyword, rest in _final_stage() if keyword == "EXPOSE" for p in rest.split()}
    assert {str(config.gateway.port), str(config.app.port)} <= exposed


def test_the_base_images_are_pinned_to_a_release() -> None:
    bases = [rest.split()[0] for keyword, rest in _instructions(ROOT / "Dockerfile") if keyword == "FROM"]
    assert bases
    for base in bases:
        assert re.search(r":\d+\.\d+\.\d+[\w.-]*$", base), f"FROM {base}: pin a full version, not a moving tag"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_final_stage_holds_no_source_that_could_shadow_the_installed_package(package: str) -> None:
    # `python -m` puts the working folder first on sys.path: sources there would be imported
    copies = [rest for keyword, rest in _final_stage() if keyword in {"COPY", "ADD"} and "--from" not in rest]
    assert not [c for c in copies if c.split()[0].rstrip("/") in {package, "."}]


def test_the_compose_commands_run_as_written() -> None:
    # compose's `command: routelens --config ...` replaces CMD; an ENTRYPOINT would be put before it
    assert not [rest for keyword, rest in _instructions(ROOT / "Dockerfile") if keyword == "ENTRYPOINT"]
    cmd = [json.loads(rest) for keyword, rest in _final_stage() if keyword == "CMD"]
    assert cmd and cmd[-1][0] == "routelens", "CMD, in exec form, runs routelens"
