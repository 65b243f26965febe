"""Schema-validated TOML configuration files: load, validate, and explain every problem in one line.

``party.toml`` (:mod:`collabcausal.party.config`) and ``study.toml``
(:mod:`collabcausal.analyst.config`) are described by pydantic v2 models built on
:class:`Section`: unknown keys are refused (a typo never silently falls back to a default), every
value is type- and range-checked, and strict types refuse silent coercion (``min_subjects = "20"``
or ``insecure = 1``). :func:`load_toml_model` turns the first validation error into a
:class:`~collabcausal.errors.ConfigError` naming the file, the section and key, and the fix,
with a "did you mean" hint (:mod:`difflib`) for unknown keys::

    party.toml: unknown key [policy] min_subject; fix: did you mean 'min_subjects'?

A field's ``description`` says what a valid value looks like; it becomes the fix of a bad value. A
rule over a whole section (a model validator) raises ``ValueError("problem; fix: fix")``.
"""

from __future__ import annotations

import difflib
import sys
import types
from pathlib import Path
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from collabcausal.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

M = TypeVar("M", bound=BaseModel)


class Section(BaseModel):
    """Base of every configuration section: unknown keys refused, strict types, immutable."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Endpoint(Section):
    """A network endpoint with mutual TLS: ``[server]`` of study.toml, ``[analyst]`` of party.toml."""

    address: str = Field(pattern=r"^\S+:[0-9]{1,5}$", description='host:port, e.g. "coordinator.example.org:50051"')
    ca: str | None = Field(None, description='the study CA, e.g. "certs/ca.pem"')
    cert: str | None = Field(None, description='this node\'s certificate, e.g. "certs/hospital-a.pem"')
    key: str | None = Field(None, description='this node\'s key, e.g. "certs/hospital-a.key"')
    insecure: bool = Field(False, description="true or false (plaintext, loopback only)")

    def tls_paths(self, base: Path, where: str, section: str, fix: str) -> dict[str, Path | None]:
        """``ca``, ``cert``, ``key`` resolved against ``base``; all three unless ``insecure``."""
        paths = {
            k: None if getattr(self, k) is None else (base / getattr(self, k)).resolve() for k in ("ca", "cert", "key")
        }
        missing = [k for k, v in paths.items() if v is None]
        if missing and not self.insecure:
            raise ConfigError(f"{where}: [{section}] {missing[0]} is missing (mutual TLS is the default)", fix)
        return paths


def read_toml(file: Path) -> dict[str, Any]:
    """Parse a TOML file with one-line errors."""
    try:
        with Path(file).open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file", "check the path given to --config / --study") from None
    except IsADirectoryError:
        raise ConfigError(f"{file} is a folder, not a TOML file", "give the path of the .toml file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML ({exc})", "fix the syntax") from None


def load_toml_model(file: str | Path, model: type[M]) -> M:
    """Read ``file`` and validate it against ``model``; the first problem as one :class:`ConfigError`."""
    path = Path(file)
    try:
        return model.model_validate(read_toml(path))
    except ValidationError as exc:
        raise config_error(path, model, exc) from None


def config_error(file: Path, model: type[BaseModel], exc: ValidationError) -> ConfigError:
    """One line for the first error of ``exc``: where (file, section, key), what, and the fix."""
    errors = exc.errors()
    error = errors[0]
    loc = tuple(error["loc"])
    parent = _model_at(model, loc[:-1])
    allowed = sorted(parent.model_fields) if parent is not None else []
    where = _where(loc)
    if error["type"] == "extra_forbidden":
        kind = "section" if len(loc) == 1 else "key"
        guess = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        fix = f"did you mean {guess[0]!r}?" if guess else f"use one of {allowed}"
        return ConfigError(f"{file}: unknown {kind} {where}", fix)
    if error["type"] == "missing":
        typos = [e["loc"] for e in errors if e["type"] == "extra_forbidden" and tuple(e["loc"][:-1]) == loc[:-1]]
        near = difflib.get_close_matches(str(loc[-1]), [str(t[-1]) for t in typos], n=1, cutoff=0.6)
        if near:
            kind = "section" if len(loc) == 1 else "key"
            typo = _where((*loc[:-1], near[0]))
            return ConfigError(f"{file}: unknown {kind} {typo} and {where} is missing", f"did you mean {loc[-1]!r}?")
        section = _where(loc[:-1]) if len(loc) > 1 else "the file"
        return ConfigError(f"{file}: {where} is missing", f"{section} needs {loc[-1]}: {_describe(parent, loc[-1])}")
    message = str(error["msg"]).removeprefix("Value error, ")
    if isinstance(error.get("input"), dict):  # a section-wide rule (a model validator): "problem; fix: fix"
        problem, _, fix = message.partition("; fix: ")
        return ConfigError(
            f"{file}: {where + ': ' if loc else ''}{problem}",
            fix or "see docs/protocol.md for the keys and their values",
        )
    value = repr(error.get("input"))
    value = value if len(value) <= 60 else value[:57] + "..."
    return ConfigError(f"{file}: {where} = {value} is invalid ({message})", _describe(parent, loc[-1]))


def _where(loc: tuple) -> str:
    """``[section] key`` for a location, with list indices as ``section[2]``."""
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int) and parts:
            parts[-1] += f"[{part}]"
        else:
            parts.append(str(part))
    if not parts:
        return "the file"
    head = f"[{parts[0]}]"
    return " ".join([head, *parts[1:]])


def _describe(model: type[BaseModel] | None, key: Any) -> str:
    field = None if model is None else model.model_fields.get(str(key))
    if field is not None and field.description:
        return field.description
    return "see docs/protocol.md for the keys and their values"


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The section model that holds the last element of ``loc`` (walking lists and optionals)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if isinstance(part, int) or current is None:
            continue
        field = current.model_fields.get(str(part))
        current = None if field is None else _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if get_origin(annotation) in (list, tuple, Union, types.UnionType):
        for arg in get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None
