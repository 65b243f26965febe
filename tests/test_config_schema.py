"""The shared TOML schema layer: unknown keys with a hint, missing keys, bad values, all in one line."""

from __future__ import annotations

import pytest
from pydantic import Field

from collabcausal.config_schema import Section, load_toml_model
from collabcausal.errors import ConfigError


class Inner(Section):
    size: int = Field(1, ge=1, description="a positive integer, e.g. 4")
    label: str = "x"


class Outer(Section):
    inner: Inner
    items: list[Inner] = Field(default_factory=list)


def _load(tmp_path, text):
    path = tmp_path / "c.toml"
    path.write_text(text)
    return load_toml_model(path, Outer)


def test_a_valid_file_loads_with_defaults(tmp_path):
    loaded = _load(tmp_path, "[inner]\nsize = 3\n")
    assert loaded.inner.size == 3 and loaded.inner.label == "x" and loaded.items == []


@pytest.mark.parametrize(
    ("text", "problem", "fix"),
    [
        ("[inner]\nsiez = 3\n", "unknown key [inner] siez", "did you mean 'size'?"),
        ("[inner]\nzzz = 3\n", "unknown key [inner] zzz", "use one of ['label', 'size']"),
        ("[inner]\n[qqq]\n", "unknown section [qqq]", "use one of ['inner', 'items']"),
        ("[innr]\nsize = 3\n", "unknown section [innr] and [inner] is missing", "did you mean 'inner'?"),
        (
            "[inner]\nsize = 0\n",
            "[inner] size = 0 is invalid (Input should be greater than or equal to 1)",
            "a positive integer, e.g. 4",
        ),
        (
            "[inner]\nsize = true\n",
            "[inner] size = True is invalid (Input should be a valid integer)",
            "a positive integer, e.g. 4",
        ),
        (
            "[inner]\n[[items]]\nsize = 2\n[[items]]\nsizes = 2\n",
            "unknown key [items[1]] sizes",
            "did you mean 'size'?",
        ),
        ("", "[inner] is missing", "the file needs inner"),
    ],
)
def test_every_problem_is_one_line_naming_file_key_and_fix(tmp_path, text, problem, fix):
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, text)
    assert info.value.problem == f"{tmp_path / 'c.toml'}: {problem}"
    assert fix in info.value.fix and "\n" not in str(info.value)


def test_missing_file_and_bad_syntax(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_toml_model(tmp_path / "absent.toml", Outer)
    with pytest.raises(ConfigError, match="not valid TOML"):
        _load(tmp_path, "[inner\n")
