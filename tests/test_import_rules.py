"""The rooms' dependency rules (DESIGN.md): checked on the import statements themselves."""

import ast
import importlib
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


# app/ uses router_core and ingest through their public face only: the names in the top-level
# package's ``__all__`` (heavy ones load on first use there, so this costs no start-up time).
# Counted: every import statement, in functions and under ``if TYPE_CHECKING:`` too.
PUBLIC = ("router_core", "ingest")


def public_names(package: str) -> set[str]:
    """The package's ``__all__``, read from its ``__init__.py`` without importing it."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{package}/__init__.py has no __all__")


def private_uses(source: str, public: dict[str, set[str]]) -> list[str]:
    """The imports in ``source`` that reach past ``public`` (package -> its public names)."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names if a.name.split(".")[0] in public and "." in a.name]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            root = node.module.split(".")[0]
            if root not in public:
                continue
            if node.module != root:
                bad += [f"{node.module}.{a.name}" for a in node.names]
            else:
                bad += [f"{root}.{a.name}" for a in node.names if a.name not in public[root]]
    return bad


def test_app_uses_only_public_names_of_router_core_and_ingest() -> None:
    public = {package: public_names(package) for package in PUBLIC}
    offenders = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        name = str(path.relative_to(ROOT))
        if bad := private_uses(path.read_text(encoding="utf-8"), public):
            offenders[name] = bad
    assert offenders == {}, "\n" + "\n".join(f"{f}: {', '.join(b)}" for f, b in offenders.items())


def test_a_private_use_is_found() -> None:
    public = {"ingest": {"SinkError"}, "router_core": {"Router"}}
    source = (
        "import ingest\nfrom ingest import SinkError\nfrom schemas.trace import DecisionTrace\n"
        "def f():\n    from router_core.decide.router import Router\n    import ingest.duckdb\n"
        "if TYPE_CHECKING:\n    from router_core import Decision\n"
    )
    assert private_uses(source, public) == ["router_core.decide.router.Router", "ingest.duckdb", "router_core.Decision"]


@pytest.mark.parametrize("package", PUBLIC)
def test_every_public_name_resolves(package: str) -> None:
    module = importlib.import_module(package)
    missing = sorted(n for n in public_names(package) if not hasattr(module, n))
    assert missing == []
