"""Dependencies point one way: worker/ may use the service, server/ only the harness's contracts,
and the harness nothing but the standard library, torch and numpy (it runs in a course venv)."""
import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def imports(source: str, package: str) -> set[str]:
    """Every module a file of this package imports, anywhere in it (relative imports made
    absolute)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def files(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def imports_of(path: Path) -> set[str]:
    return imports(path.read_text(), ".".join(path.relative_to(ROOT).parts[:-1]))


@pytest.mark.parametrize("path", files("server"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_service_uses_only_the_harness_of_the_worker(path):
    wrong = sorted(name for name in imports_of(path)
                   if name.startswith("worker") and not name.startswith("worker.harness"))
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


@pytest.mark.parametrize("path", files("worker/harness"), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_harness_needs_only_the_standard_library_torch_and_numpy(path):
    allowed = set(sys.stdlib_module_names) | {"torch", "numpy", "worker"}
    wrong = sorted(name for name in imports_of(path)
                   if name.split(".")[0] not in allowed
                   or (name.startswith("worker") and not name.startswith("worker.harness")))
    assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


def test_the_walk_sees_imports_inside_functions_and_relative_ones():
    source = "def f():\n    from worker import grading\nfrom .queue import enqueue\n"
    assert {"worker.grading", "server.queue.enqueue"} <= imports(source, "server")
    assert "worker.harness.jobs" in imports("from .jobs import Job", "worker.harness")


def test_every_configured_executor_is_registered():
    from server.config import EXECUTOR_NAMES
    from worker.executors import EXECUTORS
    assert set(EXECUTORS) == set(EXECUTOR_NAMES)
