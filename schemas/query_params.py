"""A query string read one value a parameter: a parameter given twice is refused, a list's repeats joined.

The HTTP APIs (the store's, the gateway's own routes, the prober's) each read their query strings
with :func:`one_value_each` and answer :class:`GivenTwice` as a 400 in their own error shape,
naming the parameter. Taking the first of two values (or the last) silently answers a question
the client did not ask; a parameter that takes a list (``unset=model,rule``) takes its repeats
too (``unset=model&unset=rule``), as OpenAPI's form style writes a list. No web framework here:
the callers pass their query string's ``(name, value)`` pairs.
"""

from __future__ import annotations

from collections.abc import Container, Iterable

__all__ = ["GivenTwice", "given_twice", "one_value_each"]


class GivenTwice(ValueError):
    """A parameter that takes one value was given more than once (a 400 naming ``param``)."""

    def __init__(self, param: str) -> None:
        super().__init__(given_twice(param))
        self.param = param


def given_twice(param: str) -> str:
    """The message of a 400 for ``param`` given more than once."""
    return f"parameter `{param[:64]}` is given twice"


def one_value_each(pairs: Iterable[tuple[str, str]], names: Container[str] | None = None,
                   lists: Container[str] = ()) -> dict[str, str]:
    """One value a parameter: ``pairs`` (a query string's, in order) as a dict.

    Args:
        pairs: The query string's ``(name, value)`` pairs, repeats included.
        names: The parameters read; the others are left out, given twice or not (a parameter a
            route does not take is ignored). None: every name is read.
        lists: The parameters that take a comma-separated list: their repeated values are joined
            with commas, in the order given.

    Raises:
        GivenTwice: A parameter outside ``lists`` is given more than once (the first such, named).
    """
    out: dict[str, str] = {}
    for name, value in pairs:
        if names is not None and name not in names:
            continue
        if name not in out:
            out[name] = value
        elif name in lists:
            out[name] = f"{out[name]},{value}"
        else:
            raise GivenTwice(name)
    return out
