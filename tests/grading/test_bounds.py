"""Bounds a submission cannot lift (issue 16 §3): the report's size and the submission's time.

The harness code in the student's process is the submission's to rewrite, its own caps
included: the bounds hold in the grader, and again where the service stores a report."""

import json
import time

import pytest
from helpers import REFERENCE_Q, queue_submission

from server.core import runs
from server.core.models import GradingRun, Submission
from worker.harness import spool
from worker.harness.jobs import Job
from worker.harness.report import MAX_REPORT_BYTES, MAX_TEXT, Report, bounded

# about 100 bytes: the student-side cap on an exception's message lifted, then a 15 MB exception
HUGE_EXCEPTION = (
    "import sys\nsys.modules['worker.harness.student'].MAX_MESSAGE=1<<30\n"
    "raise Exception('x'*15_000_000)\n"
)
HUGE_IN_A_CALL = """import sys
sys.modules['worker.harness.student'].MAX_MESSAGE = 1 << 30
def q_grads(a, b, v):
    raise ValueError('y' * 15_000_000)
"""
SLEEPY_COMBINE = """import time, torch
def stack_rows(a, b):
    time.sleep(SLEEP); return torch.vstack((a, b))
def stack_cols(a, b):
    time.sleep(SLEEP); return torch.hstack((a, b))
def batches(x, size):
    time.sleep(SLEEP); return torch.split(x, size)
def n_chunks(n, k):
    time.sleep(SLEEP); return len(torch.arange(n).chunk(k))
def nonzero_positions(t):
    time.sleep(SLEEP); return torch.argwhere(t)
"""


def _size(report: dict) -> int:
    return len(json.dumps(report).encode())


def test_a_15_mb_exception_at_load_gives_a_report_under_the_cap(grade_unsealed):
    """The seal taken away, since it refuses the rewritten limit: the grader's cap holds alone."""
    assert len(HUGE_EXCEPTION.encode()) < 114
    report = grade_unsealed("autograd-q", HUGE_EXCEPTION)
    assert report["status"] == "graded" and report["score"] == 0
    assert _size(report) <= MAX_REPORT_BYTES
    (load_error,) = [n for n in report["notes"] if n.get("kind") == "load-error"]
    assert load_error["code"] == "import-error"
    assert "more characters cut]" in load_error["message"]  # what is cut says so
    assert len(load_error["message"]) < 2 * MAX_TEXT


def test_a_15_mb_exception_in_a_call_gives_a_report_under_the_cap(grade_unsealed):
    report = grade_unsealed("autograd-q", HUGE_IN_A_CALL)
    assert report["score"] == 0 and _size(report) <= MAX_REPORT_BYTES
    assert {d["code"] for c in report["checks"] for d in c["diagnostics"]} <= {"exception"}


def test_the_huge_exception_report_stores_fine(grade, database):
    report = grade("autograd-q", HUGE_EXCEPTION)
    submission_id = queue_submission(database, HUGE_EXCEPTION)
    with database.sessions.begin() as session:
        claimed = runs.claim(session, submission_id, "local", "t", grading_lease())
    with database.sessions.begin() as session:
        assert runs.record(session, claimed.run_id, Report.parse(report)) == "graded"
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        run = submission.runs[-1]
        assert (submission.status, submission.score) == ("graded", 0)
        stored = json.dumps(
            [
                run.notes,
                run.output,
                [
                    (c.message, [(d.message, d.details, d.translations) for d in c.diagnostics])
                    for c in run.checks
                ],
            ]
        )
        assert len(stored) <= MAX_REPORT_BYTES


def grading_lease():
    import datetime as dt

    return dt.timedelta(minutes=5)


def test_bounded_cuts_every_string_and_the_whole():
    long = "z" * 10_000_000
    report = {
        "exercise": "x",
        "status": "graded",
        "score": 0.0,
        "max_score": 1.0,
        "checks": [
            {
                "name": f"c{i}",
                "title": "t",
                "points": 0.0,
                "max_points": 1.0,
                "passed": False,
                "message": long,
                "diagnostics": [
                    {
                        "code": "exception",
                        "message": long,
                        "hint": long,
                        "details": {"error": long, "list": [long] * 1000},
                        "translations": {"es": {"message": long}},
                    }
                ],
            }
            for i in range(40)
        ],
        "notes": [{"kind": "cell-error", "message": long}] * 5000,
        "output": long,
    }
    cut = bounded(report)
    assert _size(cut) <= MAX_REPORT_BYTES and cut["cut"] is True
    assert [c["name"] for c in cut["checks"]] == [f"c{i}" for i in range(40)]
    assert {d["code"] for c in cut["checks"] for d in c["diagnostics"]} <= {"exception"}
    assert cut["output"].endswith("more characters cut]")
    small = {
        "exercise": "x",
        "status": "graded",
        "score": 1.0,
        "max_score": 1.0,
        "checks": [],
        "notes": [],
        "output": "hi",
    }
    assert bounded(small) == small


def test_the_store_refuses_a_report_over_the_cap_and_stores_nothing_of_it(database):
    submission_id = queue_submission(database, REFERENCE_Q)
    with database.sessions.begin() as session:
        claimed = runs.claim(session, submission_id, "local", "t", grading_lease())
    huge = {
        "exercise": "autograd-q",
        "status": "graded",
        "score": 10.0,
        "max_score": 10.0,
        "checks": [],
        "notes": [{"kind": "cell-error", "message": "x" * 15_000_000}],
        "output": "",
        "environment": {"node": "n"},
        "timing": {"total": 1.0},
    }
    with database.sessions.begin() as session:
        assert runs.record(session, claimed.run_id, Report.parse(huge)) == "failed"
    with database.sessions() as session:
        run = session.get(GradingRun, claimed.run_id)
        assert run.status == "failed" and run.score is None and run.notes is None
        assert run.environment is None and not run.checks
        assert f"more than the {MAX_REPORT_BYTES} the service stores" in run.error
        # a grader error, retried, never a grade
        assert session.get(Submission, submission_id).status == "queued"


def test_the_spool_does_not_read_a_report_over_the_cap(tmp_path):
    job = Job("autograd-q", "/nowhere", "", "work.py", id="7")
    folder = spool.run_dir(tmp_path, spool.write_run(tmp_path, job, b"x = 1\n").id)
    spool.write_atomically(
        folder / spool.REPORT,
        json.dumps({"status": "graded", "output": "x" * (2 * MAX_REPORT_BYTES)}).encode(),
    )
    report = spool.read_report(folder)
    assert report.status == "error" and "the service stores" in report.error


def test_a_submission_past_its_budget_has_its_other_checks_scored_0(grade):
    budget = 3.0
    started = time.monotonic()
    report = grade("tensors-combine", SLEEPY_COMBINE.replace("SLEEP", "1.2"), budget_seconds=budget)
    took = time.monotonic() - started
    checks = report["checks"]
    out = [c for c in checks if any(d["code"] == "budget-exhausted" for d in c["diagnostics"])]
    assert out and all(c["points"] == 0 for c in out)
    assert report["score"] < report["max_score"]
    assert [c["name"] for c in checks[-len(out) :]] == [c["name"] for c in out]  # the last ones
    (diagnostic,) = out[-1]["diagnostics"]
    assert "ran out" in diagnostic["message"] and "3 s" in diagnostic["message"]
    assert "se agotó" in diagnostic["translations"]["es"]["message"]
    assert report["timing"]["budget_spent"] is True
    # the budget, plus the start, the second look's own time (it runs no budget-exhausted
    # check again) and the harness's round trip
    assert took < budget + 10, took


@pytest.mark.parametrize("sleep", [9.0])
def test_the_seen_file_sleeping_9_s_per_call_is_stopped_by_the_budget(grade, sleep):
    started = time.monotonic()
    report = grade(
        "tensors-combine", SLEEPY_COMBINE.replace("SLEEP", str(sleep)), budget_seconds=12
    )
    took = time.monotonic() - started
    assert report["score"] < report["max_score"] / 2
    assert took < 30, took
    stopped = [
        c for c in report["checks"] if [d["code"] for d in c["diagnostics"]] == ["budget-exhausted"]
    ]
    assert len(stopped) >= len(report["checks"]) - 2
