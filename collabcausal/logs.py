"""Progress lines on stderr through :mod:`logging`, one line per event, prefixed by who it is about.

A line reads ``[  12.3s] hospital-a: dc_representation: sent``: seconds since the command
started, then the party (or ``analyst``), then the event. Each line is written with a single
call, so lines of parties running side by side never run together. Library code logs to the
``collabcausal`` logger and prints nothing until a program (the CLI) calls
:func:`configure_logging`.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable
from functools import partial

LOGGER = "collabcausal"


class PartyFormatter(logging.Formatter):
    """``[elapsed] who: message``; ``who`` is the record's ``party`` (default: the logger's last name)."""

    def __init__(self) -> None:
        super().__init__()
        self.start = time.time()

    def format(self, record: logging.LogRecord) -> str:
        who = getattr(record, "party", record.name.rpartition(".")[2])
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        return f"[{record.created - self.start:7.1f}s] {who}: {level}{record.getMessage()}"


def configure_logging(verbosity: int = 0) -> None:
    """Send the ``collabcausal`` logger to stderr.

    Parameters
    ----------
    verbosity : int
        -1: warnings and errors only (``-q``); 0: progress (default); 1 or more: debug detail (``-v``).
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(PartyFormatter())
    logger = logging.getLogger(LOGGER)
    logger.handlers[:] = [handler]
    logger.setLevel(logging.WARNING if verbosity < 0 else logging.INFO if verbosity == 0 else logging.DEBUG)
    logger.propagate = False


def log_progress(party: str, event: str) -> None:
    """Log one INFO line about ``party`` (the ``progress(party, event)`` callback of the analyst's grid)."""
    logging.getLogger(f"{LOGGER}.progress").info("%s", event, extra={"party": party})


def log_request(party: str, event: str) -> None:
    """Log one DEBUG line about one request to or from ``party`` (shown with ``-v``).

    A study asks every party once per bootstrap replicate: at INFO these lines grew with B
    (thousands at B = 1000); the bootstrap shows a progress bar instead, and refusals stay at INFO.
    """
    logging.getLogger(f"{LOGGER}.progress").debug("%s", event, extra={"party": party})


def progress_logger(party: str) -> Callable[[str], None]:
    """``progress(event)`` logging one INFO line about ``party``."""
    return partial(log_progress, party)
