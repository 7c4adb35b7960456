"""Package module maps: an ``__init__.py`` docstring that maps its package names every module in it.

A docstring has a module map when it cites at least two modules of its own folder, cited the ways
the maps are written (and the readability audit's checker reads them): ``name``, ``name.py`` or
``name/`` in double backticks, ``name.py`` in a literal block, ``:mod:`.name```, or a role
(``:mod:``, ``:class:``, ``:func:``...) on the package's own dotted path. Such a map must name
every ``.py`` module of its folder (in the docstring, or in a list in the code that the docstring
points to, as ``app.cli.COMMANDS``), and no module that does not exist. A bare ````name```` is
also how the prose quotes code (``emit()``'s ``batch_size``), so only the unambiguous citations are
checked for existence.
"""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROOMS = ("schemas", "router_core", "ingest", "probes", "app", "sim", "bench")
MIN_CITED = 2  # one citation is a cross-reference; two or more of the folder's own modules are a map

BARE = re.compile(r"``([a-z_][a-z0-9_]*)``")
FILE = re.compile(r"(?<![\w./-])([A-Za-z_][A-Za-z0-9_]*)(?:\.py\b|/``)")
REL_MOD = re.compile(r":mod:`\.([A-Za-z_][A-Za-z0-9_]*)`")


def packages() -> list[Path]:
    return sorted(init.parent for room in ROOMS for init in (ROOT / room).rglob("__init__.py")
                  if "__pycache__" not in init.parts)


def modules_of(pkg: Path) -> set[str]:
    return {f.stem for f in pkg.glob("*.py") if f.name != "__init__.py"}


def present_in(pkg: Path) -> set[str]:
    """What a map may name: the folder's ``.py`` modules and sub-folders, and a top-level file (``setup.py``)."""
    folders = {d.name for d in pkg.iterdir() if d.is_dir() and d.name != "__pycache__"}
    return modules_of(pkg) | folders | modules_of(ROOT)


def cited(pkg: Path, doc: str) -> tuple[set[str], set[str]]:
    """The names a docstring cites as modules of ``pkg``: (explicit citations, bare ````name```` ones)."""
    dotted = re.escape(".".join(pkg.relative_to(ROOT).parts))
    own = re.compile(r":[a-z]+:`~?" + dotted + r"\.([A-Za-z_][A-Za-z0-9_]*)")
    explicit = set(FILE.findall(doc)) | set(REL_MOD.findall(doc)) | set(own.findall(doc))
    return explicit, set(BARE.findall(doc))


def listed_in_code(tree: ast.Module) -> set[str]:
    """The string constants of an ``__init__``'s own statements (a docstring may point to such a list)."""
    body = tree.body[1:] if ast.get_docstring(tree) is not None else tree.body
    return {n.value for stmt in body for n in ast.walk(stmt)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def mapped() -> list[tuple[Path, ast.Module]]:
    out = []
    for pkg in packages():
        tree = ast.parse((pkg / "__init__.py").read_text(encoding="utf-8"))
        explicit, bare = cited(pkg, ast.get_docstring(tree) or "")
        if len((explicit | bare) & modules_of(pkg)) >= MIN_CITED:
            out.append((pkg, tree))
    return out


def test_the_maps_are_found() -> None:
    found = {str(p.relative_to(ROOT)) for p, _ in mapped()}
    assert {"router_core/decide", "router_core/state", "ingest/duckdb", "app/ui", "sim"} <= found


MAPPED = mapped()


@pytest.mark.parametrize(("pkg", "tree"), MAPPED, ids=[str(p.relative_to(ROOT)) for p, _ in MAPPED])
def test_a_module_map_names_every_module_and_only_modules_that_exist(pkg: Path, tree: ast.Module) -> None:
    explicit, bare = cited(pkg, ast.get_docstring(tree) or "")
    missing = sorted(modules_of(pkg) - explicit - bare - listed_in_code(tree))
    assert missing == [], f"{pkg.relative_to(ROOT)}/__init__.py's module map leaves out {missing}"
    ghosts = sorted(explicit - present_in(pkg))
    assert ghosts == [], f"{pkg.relative_to(ROOT)}/__init__.py's module map names modules that do not exist: {ghosts}"
