import json
from pathlib import Path

import pytest

from app.cli import main
from router_core.framework.plugin import PluginBase

FLEET = 'fleet:\n  instances:\n    - {id: a, model: m, url: "http://127.0.0.1:1"}\n'


def in_tree_plugin_classes() -> dict[str, str]:
    """Every PluginBase subclass in router_core's plugin folders, found by import, not by the registry."""
    import importlib
    import pkgutil

    for pkg in ("router_core.filters", "router_core.scorers", "router_core.pickers"):
        for mod in pkgutil.iter_modules(importlib.import_module(pkg).__path__):
            importlib.import_module(f"{pkg}.{mod.name}")
    found, todo = {}, list(PluginBase.__subclasses__())
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        if cls.__module__.startswith("router_core."):
            found[cls.TYPE] = cls.EXTENSION_POINT
    return found


def test_plugins_lists_every_in_tree_plugin_through_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert all(set(entry) == {"type", "extension_point"} for entry in listed)
    assert {e["type"]: e["extension_point"] for e in listed} == in_tree_plugin_classes()
    assert len({e["type"] for e in listed}) == len(listed) == 19


@pytest.mark.parametrize(("plugins", "line", "expected"), [
    ("    - {type: queue-depth-scorer, weight: 0.5,\n       parameters: {queue_norm: 0}}\n", 7,
     "router.plugins[0].parameters.queue_norm (queue/queue-depth-scorer): Input should be greater than 0"),
    ("    - {type: freshness-filter}\n    - {type: nope-scorer, name: x}\n", 7,
     "router.plugins[1].type (x/nope-scorer): unknown plugin type 'nope-scorer'"),
    ("    - {type: cost-scorer}\n", 6,
     "router.plugins[0].weight (cost/cost-scorer): the scorer cost/cost-scorer needs a weight"),
    ("    - {type: max-score-picker}\n    - {type: p2c-picker}\n", 7,
     "router.plugins[1] (p2c/p2c-picker): a second picker"),
], ids=["bad-parameter", "unknown-type", "weightless-scorer", "second-picker"])
def test_a_bad_plugin_names_file_line_and_name_type(tmp_path: Path, capsys: pytest.CaptureFixture[str], plugins: str,
                                                    line: int, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(FLEET + "router:\n  plugins:\n" + plugins)
    assert main(["serve", "--config", str(bad)]) == 2  # refused before anything starts
    err = " ".join(capsys.readouterr().err.split())
    assert f"{bad}:{line}: {expected}" in err
