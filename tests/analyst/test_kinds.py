"""The registry of study kinds: one module per kind, one entry point, the command only looks it up."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from collabcausal.analyst.kinds import KIND_MODULES, KINDS, kind_runner


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_is_one_module_with_one_entry_point(kind):
    run = kind_runner(kind)
    assert run.__module__ == KIND_MODULES[kind] == f"collabcausal.analyst.kind_{kind}"
    assert list(inspect.signature(run).parameters) == ["grid", "config", "plan", "progress"]


def test_the_registry_imports_no_kind_until_one_is_looked_up():
    code = (
        "import sys\nfrom collabcausal.analyst.kinds import KIND_MODULES\n"
        "print(set(KIND_MODULES.values()) & set(sys.modules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "set()\n"
