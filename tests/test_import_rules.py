"""The rooms' dependency rules (DESIGN.md): checked on the import statements themselves."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"schemas", "router_core", "ingest", "probes", "app", "sim", "bench"}
FORBIDDEN = {
    "schemas": OURS - {"schemas"},
    "router_core": {"ingest", "app", "sim", "bench", "probes"},
    "ingest": {"router_core", "app", "sim", "bench", "probes"},
    "sim": {"router_core", "ingest", "app", "probes", "bench"},
}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("room", sorted(FORBIDDEN))
def test_room_imports_only_what_it_may(room: str) -> None:
    files = list((ROOT / room).rglob("*.py"))
    assert files, f"{room} has no modules"
    bad = {str(f.relative_to(ROOT)): sorted(imported_roots(f) & FORBIDDEN[room]) for f in files}
    assert {f: b for f, b in bad.items() if b} == {}
