"""Kill -9 loops: show that what a party acknowledged survives a crash at any instant.

:func:`kill_loop` forks a child that runs ``writer(fd)`` forever (each acknowledged record's id is
written to ``fd`` once it is durable), kills it with SIGKILL at a random moment, lets ``check``
inspect the files the child left, and repeats. The ledger's and the audit log's tests and
``benchmarks/bench_faults.py`` use it; it needs ``os.fork`` (POSIX). Test tooling, so it lives in
tests/ (importable as ``fault_injection``: tests/ is on the path through its conftest.py), not in
the production package.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable


def kill_loop(
    writer: Callable[[int], None],
    kills: int,
    *,
    seed: int = 0,
    max_delay: float = 0.2,
    check: Callable[[set[int]], None] | None = None,
) -> set[int]:
    """Kill ``writer`` ``kills`` times; return every id it acknowledged before a kill.

    Parameters
    ----------
    writer : callable
        ``writer(fd)`` runs in a forked child and never returns: it writes records and, after each
        is durable, its integer id and a newline to ``fd``.
    kills : int
        Children started and killed.
    seed : int
        Seed of the random kill delays (uniform in ``[0, max_delay]`` s after the first ack).
    check : callable, optional
        ``check(acknowledged)`` after each kill, with the ids acknowledged so far.
    """
    rng = random.Random(seed)
    acknowledged: set[int] = set()
    for _ in range(kills):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child is killed)
            os.close(read_fd)
            try:
                writer(write_fd)
            finally:
                os._exit(1)
        os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            first = pipe.readline()  # the child is writing
            time.sleep(rng.uniform(0.0, max_delay))
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            acknowledged |= {int(line) for line in (first + pipe.read()).split()}
        if check is not None:
            check(acknowledged)
    return acknowledged
