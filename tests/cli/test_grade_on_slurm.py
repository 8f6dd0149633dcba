"""`hpcgrade grade … --executor slurm` as the README writes it, `hpcgrade slurm check`'s advice
and what scripts/slurm says (issue 23): with no COURSE_PYTHON a job ran the node's own python3,
which has no torch, and `--python` was not used; the check named the cause, then said to fix
SLURM_*; scripts/slurm printed the tests' exports to a newcomer."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import slurm_cluster
from click.testing import CliRunner

from server.core.catalogue import default_root
from worker.cli.cluster import what_to_fix
from worker.cli.main import main
from worker.grading.shapes import Shape
from worker.harness.report import Report

ROOT = default_root().parent
CORRECT = ROOT / "examples" / "autograd-q" / "alice_correct.py"


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    """A Slurm executor that records the shape of the job it is given, with COURSE_PYTHON as
    `cluster.course_python` says."""
    asked = SimpleNamespace(course_python=None, shapes=[])

    def executor():
        return SimpleNamespace(spool=tmp_path, default=Shape(python=asked.course_python))

    def submit_and_wait(_slurm, jobs, shape):
        asked.shapes.append(shape)
        return [Report.grader_error("not run", job.exercise) for job in jobs]

    monkeypatch.setattr("worker.cli.cluster.slurm_executor", executor)
    monkeypatch.setattr("worker.grading.executor.submit_and_wait", submit_and_wait)
    return asked


@pytest.mark.parametrize(
    "course_python, given, runs",
    [
        (None, [], sys.executable),  # nothing set: this interpreter
        (None, ["--python", "/venv/bin/python"], "/venv/bin/python"),
        ("/course/bin/python", [], "/course/bin/python"),  # COURSE_PYTHON, where it is set
        ("/course/bin/python", ["--python", "/venv/bin/python"], "/venv/bin/python"),
    ],
)
def test_a_grade_on_slurm_runs_an_interpreter_that_has_torch(cluster, course_python, given, runs):
    cluster.course_python = course_python
    CliRunner().invoke(main, ["grade", "autograd-q", str(CORRECT), "--executor", "slurm", *given])
    assert [shape.python for shape in cluster.shapes] == [runs]


def test_slurm_check_points_at_course_python_when_a_course_has_no_python():
    shapes = {"course a": Shape(course="a"), "course b": Shape(course="b", python="/b/python")}
    unset = SimpleNamespace(python_unset=True)
    python_only = what_to_fix(unset, shapes, ["course a: neither … COURSE_PYTHON is set"])
    assert "COURSE_PYTHON" in python_only and "SLURM_*" not in python_only
    both = what_to_fix(unset, shapes, ["course a: no python", "partition gpu is down"])
    assert "COURSE_PYTHON" in both and "SLURM_*" in both
    cluster_only = what_to_fix(SimpleNamespace(python_unset=False), shapes, ["gpu is down"])
    assert "COURSE_PYTHON" not in cluster_only and "SLURM_*" in cluster_only


@pytest.mark.slurm
@pytest.mark.skipif(
    not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
)
def test_scripts_slurm_says_what_runs_and_keeps_the_exports_for_the_tests():
    """A newcomer reads what runs and what to do next; the test suite still gets its exports."""
    said = subprocess.run(["scripts/slurm"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert said.returncode == 0, said.stderr
    assert "export" not in said.stdout and "partition grading" in said.stdout
    assert "Next: scripts/run --executor slurm" in said.stdout
    exports = subprocess.run(
        ["scripts/slurm", "--exports"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert "export HPCGRADE_TEST_SLURM=own" in exports.stdout
    assert "HPCGRADE_TEST_COURSE_PYTHON=" in exports.stdout
