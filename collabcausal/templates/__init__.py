"""Commented configuration templates: ``party init`` writes party.toml, ``analyst init`` study.toml.

The templates are files of this package: ``party.toml`` (the private study kind, dp_effects: the
default of ``party init``), ``party-dcqe.toml`` (plain DC-QE, ``party init --kind dcqe``) and
``study.toml``; each loads with the project's own loader once its paths point at real files
(tested on the LaLonde example).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from collabcausal.errors import InputError

TEMPLATES = ("party.toml", "party-dcqe.toml", "study.toml")


def write_template(name: str, out: str | Path, *, force: bool = False) -> Path:
    """Write the template ``name`` to ``out``; an existing file is kept unless ``force``."""
    path = Path(out)
    if path.is_dir():
        raise InputError(f"--out {path} is a folder", f"give a file name, e.g. --out {path / name}")
    if path.exists() and not force:
        raise InputError(f"{path} exists", "keep it, or pass --force to replace it with the template")
    if not path.parent.is_dir():
        raise InputError(f"folder {path.parent} does not exist", "create it first")
    path.write_text(files(__name__).joinpath(name).read_text())
    return path
