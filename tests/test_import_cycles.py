"""No import circle inside ``ingest/`` or ``sim/``: checked on the import statements themselves.

Each module of a room is a node; an edge goes from a module to every module of the same room it
imports, and to the packages whose ``__init__`` that import runs (``from ingest.pipeline.emitter
import X`` runs ``ingest/pipeline/__init__.py`` too), except the importer's own packages, which
are already loading. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module,
to ``pkg`` otherwise.

Counted: imports at module level and imports inside functions. A function-level import does not
fail at start-up the way a module-level circle can, but it is the usual way of hiding one (the
two modules still need each other), so it counts here. Not counted: imports under
``if TYPE_CHECKING:``, which never run.
"""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("ingest", "sim")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Yield the import statements under ``node``, skipping ``if TYPE_CHECKING:`` bodies."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            for other in child.orelse:
                yield from _imports_of(other)
            continue
        yield from _imports_of(child)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.Import | ast.ImportFrom):
        yield node
    else:
        yield from _imports(node)


def _with_packages(target: str, importer: str, modules: set[str]) -> set[str]:
    """``target`` and the packages its import runs on the way, minus the importer's own (already loading)."""
    parts = target.split(".")
    own = {".".join(importer.split(".")[:i]) for i in range(1, importer.count(".") + 1)}
    passed = {".".join(parts[:i]) for i in range(1, len(parts))} - own
    return {name for name in passed | {target} if name in modules}


def import_graph(room: str) -> dict[str, set[str]]:
    files = {module_name(p): p for p in sorted((ROOT / room).rglob("*.py"))}
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


@pytest.mark.parametrize("room", ROOMS)
def test_room_has_no_import_circle(room: str) -> None:
    graph = import_graph(room)
    assert len(graph) > 1, f"{room} has no modules"
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_is_found() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_edges_follow_submodules_and_skip_type_checking() -> None:
    assert "sim.admin" in import_graph("sim")["sim.server"]  # a function-level import counts
    assert "sim.server" not in import_graph("sim")["sim.admin"]  # an `if TYPE_CHECKING:` one does not


# ingest/__init__.py lists its parts in this order: each imports only parts listed before it.
INGEST_LAYERS = [{"errors", "kinds"}, {"record_sink", "trace_store"}, {"analytics", "experiments"}, {"codec"},
                 {"spool"}, {"pipeline"}, {"duckdb", "elasticsearch"}, {"intake"}, {"http_api"}]


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
