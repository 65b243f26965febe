"""Scripts run as ``python scripts/X.py`` put their folder first on sys.path, so a script named like a
module that any library imports shadows it in that process: scripts/coverage.py once broke numba's
optional ``import coverage``, and with it econml, in scripts/ihdp.py."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("scripts", "benchmarks")
# the heavy libraries the scripts import (their optional imports are where a shadow bites)
LIBRARIES = "econml, interpret, opendp, sklearn, scipy, pandas, matplotlib, grpc, numba"


@pytest.mark.parametrize("folder", FOLDERS)
def test_no_script_shadows_a_standard_library_module(folder):
    shadows = [p.name for p in (ROOT / folder).glob("*.py") if p.stem in sys.stdlib_module_names]
    assert shadows == [], f"{folder}/{shadows} shadow standard-library modules: rename them"


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_libraries_import_with_the_script_folder_first_on_the_path(folder):
    code = f"import sys; sys.path.insert(0, {str(ROOT / folder)!r}); import {LIBRARIES}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT / folder)
    assert done.returncode == 0, f"a {folder}/ file shadows a module a library imports:\n{done.stderr[-800:]}"
