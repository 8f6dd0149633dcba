"""A grading run's status, its lease, and the run's making and unmaking are written by one
module, server/core/runs.py, along the moves of its table: nothing else in the service writes
them, and a move the table does not have is refused."""

import ast
import datetime as dt
import subprocess
from pathlib import Path

import pytest

from server.core import runs
from server.core.models import GradingRun, RunStatus

ROOT = Path(__file__).parents[2]
OWNER = Path("server/core/runs.py")
# what only the owner writes: a run's status and its lease
OWNED = {"status", "lease_until"}


def run_writes(root: Path) -> list[str]:
    """Where a module other than the owner writes a run's owned columns, or makes or deletes a
    run: "path:line what"."""
    found = []
    for path in sorted(
        p for package in ("server", "worker", "hpcgrade") for p in (root / package).rglob("*.py")
    ):
        relative = path.relative_to(root)
        if relative == OWNER:
            continue
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            found += [f"{relative}:{node.lineno} {what}" for what in _writes(node)]
    return found


def _writes(node: ast.AST) -> list[str]:
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        named = [
            t
            for target in targets
            for t in ast.walk(target)
            if isinstance(t, ast.Attribute) and t.attr in OWNED
        ]
        # a status assigned a RunStatus, or any owned column of something named a run
        return [
            ast.unparse(node)
            for t in named
            if "RunStatus" in ast.unparse(node.value) or "run" in ast.unparse(t.value).lower()
        ]
    if not isinstance(node, ast.Call):
        return []
    callee = ast.unparse(node.func)
    if callee not in ("GradingRun", "delete", "sqlalchemy.delete") and not callee.endswith(
        ".values"
    ):
        return []
    source = ast.unparse(node)
    keywords = {k.arg for k in node.keywords}
    if callee == "GradingRun":
        return [f"a run made: {source}"]
    if callee in ("delete", "sqlalchemy.delete") and "GradingRun" in source:
        return [f"a run deleted: {source}"]
    if callee.endswith(".values") and "update(GradingRun)" in source and keywords & OWNED:
        return [source]
    return []


def test_only_the_owner_writes_a_runs_status_or_lease():
    assert run_writes(ROOT) == []


def test_the_guard_finds_the_writes_the_service_had_before_the_owner(tmp_path):
    """The tree as it was before server/core/runs.py: status written in settle, preview, grades
    and the regrade's web module. The guard must name each."""
    before = "9d00e21"
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", before, "server", "worker", "hpcgrade"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        pytest.skip("this checkout's history does not reach back to before the owner")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    places = {line.split(":")[0] for line in run_writes(tmp_path)}
    assert places >= {
        "worker/grading/settle.py",
        "worker/grading/preview.py",
        "server/core/grades.py",
        "server/web/regrade_preview.py",
        "server/web/regrade.py",
    }


def test_the_table_leads_from_every_status_and_ends_where_a_run_is_over():
    assert set(runs.MOVES) == set(RunStatus) | {None}
    reachable = {to for moves in runs.MOVES.values() for to in moves}
    assert reachable >= set(RunStatus)
    over = {RunStatus.done, RunStatus.failed, RunStatus.lost, RunStatus.cancelled}
    assert {status for status, moves in runs.MOVES.items() if not moves} == over


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.preview])
def test_only_a_graded_preview_is_published(status):
    run = GradingRun(status=status.value)
    with pytest.raises(runs.IllegalMove, match=f"not a {status.value} one"):
        runs.publish_preview(run)
    assert run.status == status.value


def test_a_claimed_preview_is_the_new_workers_and_names_the_job_left_behind():
    run = GradingRun(
        status=RunStatus.previewing.value,
        worker="old:1",
        executor="slurm",
        external_id="42",
        job_state="RUNNING",
        node="n1",
    )
    until = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    assert runs.claim_preview(run, "new:2", "slurm", until) == "42"
    assert (run.worker, run.lease_until, run.external_id, run.job_state, run.node) == (
        "new:2",
        until,
        None,
        None,
        None,
    )
    other = GradingRun(status=RunStatus.previewing.value, executor="local", external_id="7")
    assert runs.claim_preview(other, "new:2", "slurm", until) is None
