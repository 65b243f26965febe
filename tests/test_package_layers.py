"""Who may import whom inside the package (docs/architecture.md, "Import direction").

Every import statement counts, at module level or inside a function (a lazy import is still a
dependency), read from the source without importing anything.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "collabcausal"

ANALYST, PARTY = "collabcausal.analyst", "collabcausal.party"
PROTOCOL, SIMULATIONS, COMMANDS = "collabcausal.protocol", "collabcausal.simulations", "collabcausal.commands"
REPORTING, ATTACKS = "collabcausal.reporting", "collabcausal.attacks"
NEUTRAL = ("collabcausal.anchor_key", "collabcausal.certs", "collabcausal.ledger", "collabcausal.sqlite_transaction",
           "collabcausal.secagg", "collabcausal.vertical",
           "collabcausal.estimators", "collabcausal.messages", "collabcausal.randomness")
FORBIDDEN = {
    # the analyst reads what parties release; what both compute identically is in a neutral module
    ANALYST: (PARTY, PROTOCOL, SIMULATIONS, COMMANDS, ATTACKS),
    PARTY: (ANALYST, PROTOCOL, SIMULATIONS, COMMANDS, REPORTING, ATTACKS),
    # a report renders results; the simulations build their document from its pieces
    REPORTING: (SIMULATIONS, COMMANDS, ANALYST, PARTY, PROTOCOL, ATTACKS),
    **{module: (ANALYST, PARTY, PROTOCOL, SIMULATIONS, COMMANDS, REPORTING, ATTACKS) for module in NEUTRAL},
}


def _name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "generated" not in p.parts}


def _resolve(module: str, name: str | None = None) -> str:
    """The project module an import names: ``from a.b import c`` is module ``a.b.c`` when that file exists."""
    if name is not None and f"{module}.{name}" in _modules():
        return f"{module}.{name}"
    while module not in _modules():
        module = module.rpartition(".")[0]
    return module


@cache
def _imports(module: str) -> frozenset[str]:
    """The project modules ``module`` imports anywhere in its source."""
    out = set()
    for node in ast.walk(ast.parse(_modules()[module].read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{module}: relative import (the package imports absolutely)"
            if node.module and node.module.split(".")[0] == "collabcausal":
                out |= {_resolve(node.module, a.name) for a in node.names}
        elif isinstance(node, ast.Import):
            out |= {_resolve(a.name) for a in node.names if a.name.split(".")[0] == "collabcausal"}
    return frozenset(out - {module})


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_it_must_not(layer: str) -> None:
    found = sorted(
        f"{module} imports {target}"
        for module in _modules()
        if _within(module, layer)
        for target in _imports(module)
        if any(_within(target, banned) for banned in FORBIDDEN[layer])
    )
    assert found == []


def test_every_layer_rule_names_modules_that_exist() -> None:
    for prefix in {*FORBIDDEN, *(b for banned in FORBIDDEN.values() for b in banned)}:
        assert any(_within(module, prefix) for module in _modules()), prefix


def test_the_study_kinds_the_registry_loads_are_analyst_modules() -> None:
    from collabcausal.analyst.kinds import KIND_MODULES

    assert KIND_MODULES and all(_within(m, ANALYST) and m in _modules() for m in KIND_MODULES.values())


def test_no_modules_import_each_other_in_a_circle() -> None:
    """Tarjan's strongly connected components of the import graph: every one is a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in _imports(module):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                circles.append(sorted(component))

    for module in _modules():
        if module not in index:
            visit(module)
    assert circles == []
