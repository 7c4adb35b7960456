"""Every RouteLens process at DEBUG: on ``PYTHONPATH`` of the privacy sweep's ``serve`` (and of the children it starts).

RouteLens offers no switch for its log level (``serve``, ``store`` and ``probes run`` call
``logging.basicConfig(level=WARNING)``); the sweep wants every line a process could write, so
``basicConfig`` is made to take DEBUG whatever it is asked.
"""

import logging

_basic_config = logging.basicConfig


def _debug_config(**kwargs: object) -> None:
    kwargs["level"] = logging.DEBUG
    _basic_config(**kwargs)  # type: ignore[arg-type]


logging.basicConfig = _debug_config  # type: ignore[assignment]
