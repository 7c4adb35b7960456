"""``router_core/framework/`` is the bottom of the router: it imports nothing of router_core above it.

Every import counts, at module level, inside functions and under ``if TYPE_CHECKING:`` (a type
named there is still a dependency). The router's own inputs (the matched rule, the mode, the
budget) extend the plugins' context one level up, in ``router_core.decide.decision``.
"""

import ast
from pathlib import Path

import router_core.framework

FRAMEWORK = Path(router_core.framework.__file__).parent
ALLOWED = ("router_core.framework", "router_core.errors")  # errors: the root of the error tree, a leaf


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            names.add(node.module or "")
    return names


def test_framework_imports_nothing_of_router_core_above_it() -> None:
    upward = sorted(
        f"{path.name} -> {name}"
        for path in sorted(FRAMEWORK.glob("*.py"))
        for name in _imported(path)
        if name.split(".")[0] == "router_core" and not name.startswith(ALLOWED)
    )
    assert upward == []


def test_the_router_context_extends_the_plugins_context() -> None:
    from router_core.decide.decision import DecisionContext
    from router_core.framework import RequestContext

    assert issubclass(DecisionContext, RequestContext)
    assert not {"route", "mode", "affinity", "budget"} & set(RequestContext.__dataclass_fields__)
