"""The packages stand on floors and every import points down or within a floor: the harness and
its contracts at the ground (what runs in a course venv and on compute nodes), the service's core
above it, the web, the grading side and the terminal/Jupyter client side by side above the core,
and the command line (with the worker's entry point) on top. No cycle anywhere."""

import ast
import functools
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PACKAGES = ("hpcgrade", "server", "worker")
# package → floor; a module belongs to the longest package that names it
FLOORS = {
    "worker.harness": "ground",
    "server.exercise_template": "ground",
    "server.core": "core",
    "server.web": "web",
    "worker.grading": "grading",
    "hpcgrade": "client",
    "worker.cli": "top",
    "worker.celery_app": "top",
    "server": "folder",
    "worker": "folder",  # their __init__: a docstring, nothing imported
}
BELOW = {
    "ground": set(),
    "core": {"ground"},
    "web": {"ground", "core"},
    "grading": {"ground", "core"},
    "client": {"ground", "core"},
    "top": {"ground", "core", "web", "grading", "client"},
    "folder": set(),
}
# a course venv's client (client/: the hpcgrade-client distribution) brings click alone; IPython,
# torch and numpy are the course venv's own
CLIENT_MAY_IMPORT = set(sys.stdlib_module_names) | {"click", "IPython", "torch", "numpy"}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = modules()


def imports(source: str, package: str, top_level_only: bool = False) -> set[str]:
    """The modules a file of `package` imports (relative imports made absolute; `from p import m`
    is the module p.m where that is one): everywhere, or only where the file's import runs them."""
    found = set()
    tree = ast.parse(source)
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base
                for alias in node.names
            )
    return found


def imports_of(module: str, top_level_only: bool = False) -> set[str]:
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    return imports(path.read_text(), package, top_level_only)


def own(name: str) -> str | None:
    """The project's module that an imported name is, or lies in; None for another library."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def floor(module: str) -> str:
    package = max((p for p in FLOORS if module == p or module.startswith(p + ".")), key=len)
    return FLOORS[package]


@functools.cache  # read once: every module's test looks at its own arrows in it
def graph() -> dict[str, set[str]]:
    return {
        module: {target for name in imports_of(module) if (target := own(name))} - {module}
        for module in MODULES
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for node in edges:
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_import_points_down_or_within_its_floor(module):
    mine = floor(module)
    wrong = sorted(
        f"{target} ({floor(target)})"
        for target in graph()[module]
        if floor(target) != mine and floor(target) not in BELOW[mine]
    )
    assert not wrong, f"{module} ({mine}) imports {wrong}"


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_check_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m.startswith("worker.harness")))
def test_the_harness_needs_only_the_standard_library_torch_and_numpy(module):
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy"}
    wrong = sorted(
        name
        for name in imports_of(module)
        if own(name) is None and name.split(".")[0] not in allowed
    )
    assert not wrong, f"{module} imports {wrong}"


def bundled() -> set[str]:
    """The grader's modules that client/setup.py puts into the hpcgrade-client distribution."""
    tree = ast.parse((ROOT / "client" / "setup.py").read_text())
    grader = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "GRADER"
    )
    return {
        module
        for module in MODULES
        for package, only in grader.items()
        if module == package
        or (only is None and module.startswith(package + "."))
        or (
            only is not None
            and module.rpartition(".")[0] == package
            and module.rpartition(".")[2] in only
        )
    }


def test_the_client_loads_with_click_alone_and_reaches_only_what_its_distribution_bundles():
    """What importing the client runs, through every project module it reaches, needs no
    library a course venv lacks (a function's own late import runs only when called), and is
    in the hpcgrade-client distribution (an import that misses it fails in the course venv
    alone)."""
    seen, todo, foreign = set(), [m for m in MODULES if m.startswith("hpcgrade")], set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        for name in imports_of(module, top_level_only=not module.startswith("hpcgrade")):
            target = own(name)
            if target is None:
                foreign.add(name.split(".")[0])
            else:
                todo.append(target)
    assert foreign <= CLIENT_MAY_IMPORT, sorted(foreign - CLIENT_MAY_IMPORT)
    assert {m for m in seen if not m.startswith("hpcgrade")} <= bundled(), sorted(
        {m for m in seen if not m.startswith("hpcgrade")} - bundled()
    )


def test_the_walk_resolves_imports_inside_functions_and_relative_ones():
    source = "def f():\n    from worker.grading import dispatch\nfrom .queue import enqueue\n"
    assert {"worker.grading.dispatch", "server.core.queue"} <= imports(source, "server.core")
    assert "worker.harness.jobs" in imports("from .jobs import Job", "worker.harness")
    assert imports(source, "server.core", top_level_only=True) == {"server.core.queue"}


def test_every_module_has_a_floor():
    assert all(floor(module) for module in MODULES)


def test_every_configured_executor_is_registered():
    from server.core.config import EXECUTOR_NAMES
    from worker.grading.executors import EXECUTORS

    assert set(EXECUTOR_NAMES) == set(EXECUTORS)
