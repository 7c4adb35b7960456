"""Reading Prometheus exposition text in tests, with prometheus_client's own parser.

``samples(text).value(NAME, label=...)`` is the value of the series called NAME with exactly those
labels (no label for an unlabelled series); ``value(text, NAME, ...)`` does the same on raw text.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

Key = tuple[str, frozenset[tuple[str, str]]]


class Samples(dict[Key, float]):
    """Every sample of one scrape, keyed by name and exact label set."""

    def value(self, name: str, /, *, default: float | None = None, **labels: str) -> float:
        """The value of series ``name{labels}``; ``default`` if given and the series is absent, else KeyError."""
        key = (name, frozenset(labels.items()))
        if key in self:
            return self[key]
        if default is not None:
            return default
        present = [dict(ls) for n, ls in self if n == name]
        raise KeyError(f"no sample {name}{labels or ''}; series of that name: {present}")


def samples(text: str) -> Samples:
    """Parse exposition text; a series that appears twice is an error, not silently overwritten."""
    out = Samples()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            key = (s.name, frozenset(s.labels.items()))
            if key in out:
                raise ValueError(f"sample {s.name}{s.labels} appears twice")
            out[key] = s.value
    return out


def value(text: str, name: str, /, **labels: str) -> float:
    """The value of series ``name{labels}`` (exact label set) in exposition text."""
    return samples(text).value(name, default=None, **labels)
