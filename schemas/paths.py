"""Paths a configuration names, resolved once at load time against the folder of the file naming them.

A relative path in ``routelens.yaml`` (a policy file, the intents' routes, the trace file...)
means "beside this file", whichever folder the program runs from. The loader validates with a
context built by :func:`path_context`; the validators of :data:`InputFile` and :data:`OutputPath`
then make each path absolute, and an input file the injected check finds unreadable fails
validation at its own location, so the error names the file, line and field that named it.
Without that context (a model built in code, a test) a path stays as it was given.

This room does no I/O: the check that reads the disk is the loader's, passed in.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, ValidationInfo
from pydantic_core import PydanticCustomError

__all__ = ["InputFile", "OutputPath", "PathContext", "path_context"]

_KEY = "routelens.paths"


@dataclass(frozen=True)
class PathContext:
    """Where relative paths start, and how to tell why an input file cannot be read.

    Attributes:
        base_dir: The folder of the file being loaded.
        unreadable: Returns why a file cannot be read (None when it can); None skips the check.
        elsewhere: Told each output path as written and where it resolves (the loader warns of a
            relative trace file that does not exist beside the configuration but does in the working
            folder, where versions before 2026-12-04 looked); None tells no one.
    """

    base_dir: Path
    unreadable: Callable[[Path], str | None] | None = None
    elsewhere: Callable[[str, Path], None] | None = None


def path_context(base_dir: str | Path, unreadable: Callable[[Path], str | None] | None = None,
                 elsewhere: Callable[[str, Path], None] | None = None) -> dict[str, Any]:
    """Return a pydantic validation context that resolves paths against ``base_dir``."""
    return {_KEY: PathContext(Path(os.path.abspath(base_dir)), unreadable, elsewhere)}


def _context(info: ValidationInfo) -> PathContext | None:
    ctx = info.context.get(_KEY) if isinstance(info.context, dict) else None
    return ctx if isinstance(ctx, PathContext) else None


def _absolute(value: str, ctx: PathContext) -> Path:
    path = Path(value).expanduser()
    return Path(os.path.normpath(path if path.is_absolute() else ctx.base_dir / path))


def _input_file(value: str, info: ValidationInfo) -> str:
    ctx = _context(info)
    if ctx is None:
        return value
    path = _absolute(value, ctx)
    if ctx.unreadable is not None and (why := ctx.unreadable(path)):
        raise PydanticCustomError("unreadable_file", "cannot read {path}: {why}", {"path": str(path), "why": why})
    return str(path)


def _output_path(value: str, info: ValidationInfo) -> str:
    ctx = _context(info)
    if ctx is None:
        return value
    path = _absolute(value, ctx)
    if ctx.elsewhere is not None:
        ctx.elsewhere(value, path)
    return str(path)


InputFile = Annotated[str, AfterValidator(_input_file)]
"""A file the program reads (a policy, routes, references): absolute and checked at load time."""

OutputPath = Annotated[str, AfterValidator(_output_path)]
"""A file or folder the program writes (the trace file, a spool): absolute at load time, may not exist yet."""
