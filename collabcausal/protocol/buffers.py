"""Receive buffers for large arrays, used again once every array on them is gone.

:func:`~collabcausal.protocol.arrays.read_message` copies each chunk into a buffer of its array's
declared size. A fresh buffer of tens of megabytes is new memory from the kernel (glibc maps it
afresh each time unless its mmap threshold, which adapts only up to 32 MiB, is raised by hand for
the whole process), which the kernel zeroes at the first write to each page and takes back when
the array is freed. A buffer of at least :data:`POOLED_BYTES` therefore comes from a
process-wide pool of arenas: the array is a view of an arena held by a lease, and when the last
array or view on it is gone Python frees the lease, which gives the arena back to the pool (up to
:data:`RETAINED_BYTES` in all; beyond that the arenas given back longest ago are freed).
``read_message`` returns arrays only once every declared byte arrived, so a reused arena is
entirely overwritten before anyone sees it: no byte of an earlier message shows in a later one,
and memory any array still refers to is never handed out.
"""

from __future__ import annotations

import threading

import numpy as np

POOLED_BYTES = 8 << 20
"""Buffers of at least this many bytes come from the pool."""
RETAINED_BYTES = 256 << 20
"""The most bytes of free arenas a process keeps."""


class _Lease:
    """One buffer on an arena of the pool; numpy holds it as the base of every array on the buffer."""

    __slots__ = ("__array_interface__", "_arena", "_pool")

    def __init__(self, pool: BufferPool, arena: np.ndarray, nbytes: int) -> None:
        self._pool = pool
        self._arena = arena
        self.__array_interface__ = {
            "data": (arena.ctypes.data, False),
            "shape": (nbytes,),
            "typestr": "|u1",
            "version": 3,
        }

    def __del__(self) -> None:
        self._pool.give(self._arena)


class BufferPool:
    """Arenas of freed receive buffers, handed out again for buffers of at most their size.

    Parameters
    ----------
    retained_bytes : int
        The most bytes of free arenas kept; beyond that the arenas given back longest ago are freed.
    """

    def __init__(self, retained_bytes: int = RETAINED_BYTES) -> None:
        self.retained_bytes = retained_bytes
        self._free: dict[int, np.ndarray] = {}  # by id, oldest first
        # A collection run inside take() or give() may free a lease, and its give() re-enters: the
        # lock is re-entrant, and each reads a copy of the free arenas and changes them by key only.
        self._lock = threading.RLock()

    def take(self, nbytes: int) -> np.ndarray:
        """A writable ``uint8`` buffer of ``nbytes``.

        Below :data:`POOLED_BYTES` a fresh one; above, on the smallest free arena that holds it
        and is less than twice its size, else on a fresh arena.
        """
        if nbytes < POOLED_BYTES:
            return np.empty(nbytes, dtype=np.uint8)
        with self._lock:
            fits = [arena for arena in list(self._free.values()) if nbytes <= arena.nbytes < 2 * nbytes]
            arena = min(fits, key=lambda fit: fit.nbytes) if fits else None
            if arena is not None:
                self._free.pop(id(arena), None)  # gone already if a re-entrant give() dropped it: ours either way
        if arena is None:
            arena = np.empty(nbytes, dtype=np.uint8)
        return np.asarray(_Lease(self, arena, nbytes))

    def give(self, arena: np.ndarray) -> None:
        """Keep ``arena``, no longer referred to by any array, for a later buffer.

        The arenas given back longest ago are freed to stay within ``retained_bytes``.
        """
        if arena.nbytes > self.retained_bytes:
            return
        with self._lock:
            self._free[id(arena)] = arena
            while self.free_bytes > self.retained_bytes:
                self._free.pop(next(iter(list(self._free))), None)

    @property
    def free_bytes(self) -> int:
        """Bytes of the free arenas kept."""
        with self._lock:
            return sum(arena.nbytes for arena in list(self._free.values()))


RECEIVE_BUFFERS = BufferPool()
"""The process's pool, used by :func:`~collabcausal.protocol.arrays.read_message`."""
