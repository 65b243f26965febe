"""Import a script of benchmarks/ or scripts/ as a module, as it runs (benchmarks/ on the path for ``_run_mode``)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = ROOT / "scripts"


def load_benchmark(name: str) -> ModuleType:
    """``benchmarks/<name>.py`` as the module ``name`` (registered in ``sys.modules``: its dataclasses look it up)."""
    if str(BENCHMARKS) not in sys.path:
        sys.path.append(str(BENCHMARKS))
    return _load(BENCHMARKS / f"{name}.py", name)


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as the module ``<name>_script`` (registered in ``sys.modules``, as above)."""
    return _load(SCRIPTS / f"{name}.py", f"{name}_script")


def _load(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
