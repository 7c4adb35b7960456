"""Every command's ``--help`` reads as plain text: no reST roles or double backquotes from module docstrings.

Before, ``replay``, ``compare`` and ``intents`` printed their module docstrings as they are
(``:mod:`app.experiments.policy_file```, ``:data:`FILTER_KEYS```).
"""

from __future__ import annotations

import argparse
import re

import pytest

from app.cli import build_parser

ROLE = re.compile(r":[a-z]+:`|``")


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("command", sorted(_commands()))
def test_the_help_holds_no_rest_markup(command: str) -> None:
    parsers = [_commands()[command]]
    parsers += [p for a in parsers[0]._actions if isinstance(a, argparse._SubParsersAction) for p in a.choices.values()]
    for parser in parsers:
        text = parser.format_help()
        assert not ROLE.search(text), (parser.prog, ROLE.findall(text))
    if command == "replay":
        assert "FILTER_KEYS" not in parsers[0].format_help() and "experiment_arm" in parsers[0].format_help()
