"""The import graph of rla_gym and agents: no cycles, and the split modules import one way."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rla_gym", "agents")


def _modules() -> dict[str, Path]:
    """Dotted name -> source file of every module of the packages (a package is its __init__)."""
    modules = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


MODULES = _modules()


def _module_level(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module does (``if TYPE_CHECKING``, ``try`` included), not in functions."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.With, ast.Try)):
            yield from _module_level(node.body)
            yield from _module_level(getattr(node, "orelse", []))
            yield from _module_level(getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []):
                yield from _module_level(handler.body)


def _targets(node: ast.Import | ast.ImportFrom, name: str) -> set[str]:
    """The modules of the packages that ``node``, in module ``name``, imports."""
    if isinstance(node, ast.Import):
        found = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:  # relative: anchored at the module's package
            package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
        # ``from pkg import sub`` imports the submodule pkg.sub; ``from mod import name`` imports mod
        found = {f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names}
    return {target for target in found if target in MODULES and target != name}


def _imports(name: str, *, anywhere: bool = False) -> set[str]:
    """The modules ``name`` imports at module level, or ``anywhere`` (functions included)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    nodes = (
        [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        if anywhere
        else list(_module_level(tree.body))
    )
    return set().union(*(_targets(node, name) for node in nodes))


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state and (found := visit(module)) is not None:
            return found
    return None


def test_the_graph_sees_every_module_and_their_imports() -> None:
    assert {"rla_gym.core", "rla_gym.envs.gui.env", "agents.loop", "agents.loop_runtime"} <= set(MODULES)
    assert "agents.loop_runtime" in _imports("agents.loop")
    assert "rla_gym.envs.gui.screenshot" in _imports("rla_gym.envs.gui.env")
    assert "rla_gym.core" in _imports("rla_gym.envs.gui.env")


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_no_import_cycles_at_module_level() -> None:
    """Module-level imports (``if TYPE_CHECKING`` ones included) of rla_gym and agents form no cycle;
    a dependency that must point back is a function-level (lazy) import, or a sign the code is
    in the wrong module."""
    cycle = _cycle({name: _imports(name) for name in MODULES})
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


@pytest.mark.parametrize(
    ("upper", "lower"),
    [
        ("agents.loop", "agents.loop_runtime"),  # the setup builds the runtime
        ("rla_gym.envs.gui.env", "rla_gym.envs.gui.screenshot"),  # the env joins the screenshot mixin
    ],
)
def test_split_modules_import_one_way(upper: str, lower: str) -> None:
    assert lower in _imports(upper)
    assert upper not in _imports(lower, anywhere=True), f"{lower} imports {upper}, even lazily"


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("agents.bench_plots", "agents.bench_report"),
        ("agents.bench_plots", "agents.bench_records"),
        ("agents.bench_report", "agents.bench_records"),
        ("agents.loop", "agents.loop_runtime"),
        ("rla_gym.envs.gui.env", "rla_gym.envs.gui.screenshot"),
    ],
)
def test_named_pairs_do_not_import_each_other(first: str, second: str) -> None:
    """Not both directions, even through imports inside functions."""
    assert not (second in _imports(first, anywhere=True) and first in _imports(second, anywhere=True))
