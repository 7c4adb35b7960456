"""Writes ``constraints.txt``: the exact version of every distribution RouteLens's tested set needs.

``make install`` and the Dockerfile install with ``pip install -c constraints.txt``, so a fresh clone
tests, and an image ships, the versions the suite last passed with, not whatever the registry holds that
day. The set is the dependency closure of ``routelens[probes,es,dev,bench]`` (markers evaluated on this
machine), each at the version installed in the running interpreter's environment; anything else in that
environment is left out. After changing a dependency in pyproject.toml (or upgrading one)::

    .venv/bin/python -m pip install -e '.[probes,es,dev,bench]' --upgrade-strategy only-if-needed
    .venv/bin/python .ci/lock.py            # rewrites constraints.txt
    make test                               # then commit both

``.ci/lock.py --check`` exits 1 and names the differences when constraints.txt is not what it would
write (tests/packaging/test_constraints.py runs it).
"""

from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "constraints.txt"
EXTRAS = ("probes", "es", "dev", "bench")
HEADER = (
    "# The versions `make test` last passed with: the dependency closure of routelens[probes,es,dev,bench].\n"
    "# Written by .ci/lock.py (its docstring says when and how to run it); do not edit by hand.\n"
)


def _wanted(req: Requirement, extras: frozenset[str]) -> bool:
    if req.marker is None:
        return True
    env = {k: str(v) for k, v in default_environment().items()}
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in (extras or {""}))


def closure(root: str = "routelens", extras: tuple[str, ...] = EXTRAS) -> dict[str, str]:
    """Canonical name -> installed version (without a local label such as ``+cpu``) of every need."""
    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(root, frozenset(extras))]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, want = todo.pop()
        if (name, want) in seen:
            continue
        seen.add((name, want))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise SystemExit(f"{name} is needed but not installed: run `make install` first") from None
        key = canonicalize_name(name)
        if key != canonicalize_name(root):
            found[key] = Version(dist.version).public
        for line in dist.requires or []:
            req = Requirement(line)
            if _wanted(req, want):
                todo.append((req.name, frozenset(req.extras)))
    return found


def render(pins: dict[str, str]) -> str:
    """The text of constraints.txt for ``pins``, sorted by name."""
    return HEADER + "".join(f"{name}=={version}\n" for name, version in sorted(pins.items()))


def main(argv: list[str] | None = None) -> int:
    """Write constraints.txt, or with ``--check`` say how it differs from what it would be."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with constraints.txt instead of writing it")
    args = parser.parse_args(argv)
    text = render(closure())
    if not args.check:
        TARGET.write_text(text, encoding="utf-8")
        print(f"wrote {TARGET.name}: {text.count('==')} pins")
        return 0
    old = TARGET.read_text(encoding="utf-8").splitlines() if TARGET.exists() else []
    new = text.splitlines()
    gone = sorted(set(old) - set(new))
    added = sorted(set(new) - set(old))
    if not gone and not added:
        return 0
    print("constraints.txt is not what this environment needs (run .ci/lock.py and make test):", file=sys.stderr)
    for line in gone:
        print(f"  - {line}", file=sys.stderr)
    for line in added:
        print(f"  + {line}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
