"""The parties' shared secret keys on disk: the row group's alignment key and the study's anchor key.

A key is 32 random bytes written as hex in a file of mode 0600, made by one party and handed to the
others out of band; the analyst never holds one.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from collabcausal.errors import ConfigError

KEY_BYTES = 32
MIN_KEY_BYTES = 16


def new_key_file(path: str | Path) -> Path:
    """Write a fresh random 256-bit key (hex) to ``path`` with mode 0600."""
    return write_key_file(path, secrets.token_bytes(KEY_BYTES))


def write_key_file(path: str | Path, key: bytes) -> Path:
    """Write ``key`` (hex) to ``path`` with mode 0600, as :func:`read_key_file` reads it."""
    file = Path(path)
    file.write_text(key.hex() + "\n")
    file.chmod(0o600)
    return file


def read_key_file(path: str | Path, kind: str, make: str) -> bytes:
    """Read a key written by :func:`new_key_file`; one-line :class:`ConfigError` naming ``kind`` otherwise.

    ``kind`` is e.g. ``"alignment"`` or ``"anchor"``; ``make`` says how to make one.
    """
    file = Path(path)
    try:
        key = bytes.fromhex(file.read_text().strip())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such {kind} key file", f"copy the study's shared {kind} key there") from None
    except ValueError:
        raise ConfigError(f"{file} is not a hex {kind} key", f"make one with {make}") from None
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(f"{file}: the {kind} key has {len(key)} bytes, fewer than 16", "use a 32-byte key")
    return key
