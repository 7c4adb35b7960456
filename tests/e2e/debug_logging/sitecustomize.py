"""Every RouteLens process at DEBUG: on ``PYTHONPATH`` of the privacy sweep's ``serve`` (and of the children it starts).

``--log-level debug`` (``ROUTELENS_LOG_LEVEL``) turns up RouteLens's own loggers only; other
libraries stay at warning, since their debug lines may carry a request. The sweep wants every line
any logger could write, so ``basicConfig`` is made to take DEBUG for all, whatever it is asked.
"""

import logging

_basic_config = logging.basicConfig


def _debug_config(**kwargs: object) -> None:
    kwargs["level"] = logging.DEBUG
    _basic_config(**kwargs)  # type: ignore[arg-type]


logging.basicConfig = _debug_config  # type: ignore[assignment]
