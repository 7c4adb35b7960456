"""No import circle inside any room: checked on the import statements themselves.

Each module of a room is a node; an edge goes from a module to every module of the same room it
imports, and to the packages whose ``__init__`` that import runs (``from ingest.pipeline.emitter
import X`` runs ``ingest/pipeline/__init__.py`` too), except the importer's own packages, which
are already loading. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
to ``pkg`` otherwise. A last graph has the rooms themselves as nodes, so that no circle runs
between rooms either (``tests/test_import_rules.py`` forbids some arrows, not every circle).

Every import counts: at module level, inside functions and under ``if TYPE_CHECKING:``. A
function-level import does not fail at start-up the way a module-level circle can, and a
``TYPE_CHECKING`` one never runs, but both are the usual ways of hiding a circle: the two modules
still need each other (issue 30 found four of its five circles closed that way).
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("schemas", "router_core", "ingest", "probes", "app", "sim", "bench")

# Circles known and being removed, by name: each entry names its issue and who removes it, and is
# the exact set of modules in the circle. The test fails on any circle not listed here, and on a
# listed one that has shrunk or gone, so the list cannot go stale. Issue 30 listed two while they
# were being taken apart (router_core/gateway/server.py with degraded, dry_run, feedback,
# ops_routes, placement, respond and resilience/degrade.py: the gateway's engineer; app/run's
# probe_child, probe_service, prober and serve: the app's engineer); both are gone (2a652a7, 61562d6).
KNOWN: dict[str, frozenset[str]] = {}


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Yield every import statement under ``node``: module level, in functions, under ``if TYPE_CHECKING:``."""
    for child in ast.walk(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child


def _with_packages(target: str, importer: str, modules: set[str]) -> set[str]:
    """``target`` and the packages its import runs on the way, minus the importer's own (already loading)."""
    parts = target.split(".")
    own = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    passed = {".".join(parts[:i]) for i in range(1, len(parts))} - own
    return {name for name in passed | {target} if name in modules}


def import_graph(room: str, root: Path = ROOT) -> dict[str, set[str]]:
    files = {module_name(p, root): p for p in sorted((root / room).rglob("*.py"))}
    modules = set(files)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                edges |= _with_packages(target, name, modules)
        graph[name] = edges - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one circle as ``[a, b, ..., a]``, or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Every circle as the set of modules that reach each other (strongly connected, two or more)."""
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    found = {frozenset({start} | {m for m in reach[start] if start in reach[m]}) for start in graph}
    return sorted((c for c in found if len(c) > 1), key=sorted)


def circle_problems(graph: dict[str, set[str]], known: dict[str, frozenset[str]]) -> list[str]:
    """What is wrong with ``graph`` given ``known``: circles not listed, listed circles shrunk or gone."""
    found = circles(graph)
    problems = [
        "import circle: " + " -> ".join(find_cycle({m: graph[m] & c for m in c}) or sorted(c))
        for c in found if not any(c <= k for k in known.values())
    ]
    for name, k in sorted(known.items()):
        left = frozenset().union(*(c for c in found if c <= k))
        if left != k:
            problems.append(f"KNOWN[{name!r}] is stale: {', '.join(sorted(k - left))} no longer in the circle; "
                            "remove the entry, or list what is left")
    return problems


def test_the_rooms_are_every_package() -> None:
    assert {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests"} == set(ROOMS)


@pytest.mark.parametrize("room", ROOMS)
def test_room_has_no_import_circle(room: str) -> None:
    graph = import_graph(room)
    assert len(graph) > 1, f"{room} has no modules"
    known = {name: k for name, k in KNOWN.items() if {m.split(".")[0] for m in k} == {room}}
    assert circle_problems(graph, known) == []


def test_rooms_import_each_other_one_way() -> None:
    graph: dict[str, set[str]] = {room: set() for room in ROOMS}
    for room in ROOMS:
        for path in (ROOT / room).rglob("*.py"):
            for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level:
                    continue
                graph[room] |= {name.split(".")[0] for name in names} & set(ROOMS) - {room}
    cycle = find_cycle(graph)
    assert cycle is None, "rooms in a circle: " + " -> ".join(cycle or [])


def test_a_circle_is_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
    assert circles({"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"c"}, "e": {"a"}}) == [
        frozenset({"a", "b"}), frozenset({"c", "d"})]


def test_a_known_circle_passes_and_a_gone_or_shrunk_one_fails() -> None:
    graph = {"r.a": {"r.b"}, "r.b": {"r.c"}, "r.c": {"r.a"}, "r.d": set()}
    assert circle_problems(graph, {"issue 30": frozenset({"r.a", "r.b", "r.c"})}) == []
    assert circle_problems(graph, {}) == ["import circle: r.a -> r.b -> r.c -> r.a"]
    assert "r.c no longer in the circle" in circle_problems(
        {**graph, "r.b": {"r.a"}, "r.c": set()}, {"issue 30": frozenset({"r.a", "r.b", "r.c"})})[0]
    assert "is stale" in circle_problems({**graph, "r.c": set()}, {"issue 30": frozenset({"r.a", "r.b", "r.c"})})[0]


def test_every_kind_of_import_is_an_edge(tmp_path: Path) -> None:
    room = tmp_path / "room"
    (room / "pkg").mkdir(parents=True)
    (room / "__init__.py").write_text("")
    (room / "pkg" / "__init__.py").write_text("")
    (room / "pkg" / "mod.py").write_text("")
    (room / "top.py").write_text("from room.pkg.mod import X\n")
    (room / "late.py").write_text("def f():\n    from room import top\n")
    (room / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import late\n")
    graph = import_graph("room", tmp_path)
    assert graph["room.top"] == {"room.pkg", "room.pkg.mod"}  # the package's __init__ runs on the way
    assert graph["room.late"] == {"room.top"}  # a function-level import counts
    assert graph["room.typed"] == {"room.late"}  # so does an `if TYPE_CHECKING:` one


# ingest/__init__.py lists its parts in this order: each imports only parts listed before it.
INGEST_LAYERS = [{"errors", "kinds"}, {"record_sink", "trace_store"}, {"analytics", "experiments"}, {"codec"},
                 {"spool"}, {"pipeline"}, {"duckdb", "elasticsearch", "otel"}, {"intake"}, {"http_api"}]


def test_each_part_of_ingest_imports_only_the_parts_before_it() -> None:
    layer = {part: i for i, parts in enumerate(INGEST_LAYERS) for part in parts}
    graph = import_graph("ingest")
    parts = {name.split(".")[1] for name in graph if "." in name}
    assert parts == set(layer), "a part of ingest/ is missing from INGEST_LAYERS (and from the package docstring)"
    upward = sorted(
        f"{src} -> {dst}" for src, edges in graph.items() for dst in edges
        if "." in src and "." in dst and layer[dst.split(".")[1]] >= layer[src.split(".")[1]]
        and src.split(".")[1] != dst.split(".")[1]
    )
    assert upward == []
