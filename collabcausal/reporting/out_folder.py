"""The output folder of a command (``--out``, ``[study] out``), checked before any work is done."""

from __future__ import annotations

import os
from pathlib import Path

from collabcausal.errors import InputError


def check_out_folder(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as an output folder: an existing file is refused at once, before any analysis runs.

    Parameters
    ----------
    path : str or path-like
        The folder (created later by the writer if missing).
    option : str
        How the user named it, for the message: ``"--out"`` or ``"[study] out"``.
    """
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{option} {folder} is a file, not a folder", f"give a folder (new or existing) as {option}")
    return folder
