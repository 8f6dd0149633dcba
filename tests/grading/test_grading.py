"""Grading into the database: results stored once, leases, grader failures never a grade."""

import datetime as dt
import textwrap
from pathlib import Path

import sqlalchemy as sa
from helpers import REFERENCE_Q, grade
from helpers import queue_submission as submit

from server.core.catalogue import load_exercise_info
from server.core.config import Settings
from server.core.models import GradingRun, Submission
from server.core.runs import MAX_RUNS, claim, release
from server.web.submissions import reopen
from worker.grading.liveness import recover
from worker.grading.local import LocalExecutor

LEASE = dt.timedelta(minutes=5)


def test_graded_once_with_checks_and_diagnostics(database, executor, catalogue):
    good = submit(database, REFERENCE_Q)
    bad = submit(database, REFERENCE_Q.replace("- b**2", "+ b**2"))
    assert grade(database, executor, catalogue, good) == "graded"
    assert grade(database, executor, catalogue, bad) == "graded"
    assert grade(database, executor, catalogue, good) == "skipped"
    with database.sessions() as session:
        first, second = session.get(Submission, good), session.get(Submission, bad)
        assert (first.status, first.score, first.max_score) == ("graded", 10, 10)
        assert second.score == 3 and len(first.runs) == 1
        codes = {d.code for c in second.runs[0].checks for d in c.diagnostics}
        assert codes == {"grad-sign-flipped"}
        assert "seccomp" in first.runs[0].sandbox["layers"]


def test_a_run_names_the_exercise_files_it_was_graded_with(database, executor, catalogue):
    """The harness's word on the files it read, and their commit where they are those synced."""
    info = catalogue["autograd-q"]
    synced = submit(database, REFERENCE_Q)
    assert grade(database, executor, catalogue, synced) == "graded"
    with database.sessions.begin() as session:
        submission = session.get(Submission, synced)
        run, exercise = submission.runs[0], submission.exercise
        assert run.exercise_version == info.version == exercise.version
        assert run.exercise_commit == exercise.commit == info.commit
        exercise.version = "0" * 64  # as if synced from other files since
    since = submit(database, REFERENCE_Q)
    assert grade(database, executor, catalogue, since) == "graded"
    with database.sessions() as session:
        run = session.get(Submission, since).runs[0]
        assert run.exercise_version == info.version and run.exercise_commit is None


def test_a_run_is_taken_over_only_once_its_lease_ran_out_or_its_worker_died(database):
    submission_id = submit(database, REFERENCE_Q)
    now = dt.datetime.now(dt.timezone.utc)
    with database.sessions.begin() as session:
        assert claim(session, submission_id, "local", "w1", LEASE, now) is not None
    with database.sessions.begin() as session:
        assert claim(session, submission_id, "local", "w2", LEASE, now) is None
    assert recover(database.sessions, lambda worker: False, now + LEASE / 2) == []
    assert recover(database.sessions, lambda worker: False, now + 2 * LEASE) == [submission_id]
    with database.sessions.begin() as session:
        assert claim(session, submission_id, "local", "w2", LEASE, now + 2 * LEASE) is not None
    assert recover(database.sessions, lambda worker: worker == "w2", now) == [submission_id]
    with database.sessions() as session:
        runs = session.scalars(sa.select(GradingRun).order_by(GradingRun.attempt)).all()
        assert [(r.worker, r.status) for r in runs] == [("w1", "lost"), ("w2", "lost")]
        assert "w2 stopped before finishing" in runs[1].error
        assert session.get(Submission, submission_id).status == "queued"


def test_a_released_runs_id_is_never_given_to_another_run(database):
    """sbatch that did not answer: its runs are released, and may still be graded by the job it
    made late, through their folders in the spool, named by run id. The next run must have
    another id (SQLite gave the highest of deleted rows again: the late job graded it too)."""
    submission_id = submit(database, REFERENCE_Q)
    with database.sessions.begin() as session:
        released = claim(session, submission_id, "slurm", "w1", LEASE).run_id
        release(session, [released])
    with database.sessions.begin() as session:
        assert claim(session, submission_id, "slurm", "w1", LEASE).run_id != released


def test_grader_failure_is_retried_then_error_never_zero(database, executor, catalogue, tmp_path):
    broken = tmp_path / "autograd-q"
    broken.mkdir()
    source = Path(catalogue["autograd-q"].path)
    for name in (
        "exercise.toml",
        "statement.en.md",
        "statement.es.md",
        "starter.py",
        "reference.py",
        "visible.py",
    ):
        (broken / name).write_bytes((source / name).read_bytes())
    (broken / "mutants").symlink_to(source / "mutants")
    (broken / "student_programs").symlink_to(source / "student_programs")
    (broken / "checks.py").write_text(
        textwrap.dedent("""
        from worker.harness.checks import check
        @check("boom", points=1, uses="q_grads", en="x", es="x")
        def boom(ctx):
            raise KeyError("a bug in the checks")
    """)
    )
    broken_catalogue = dict(catalogue, **{"autograd-q": load_exercise_info(broken)})
    submission_id = submit(database, REFERENCE_Q)
    outcomes = [
        grade(database, executor, broken_catalogue, submission_id) for _ in range(MAX_RUNS + 1)
    ]
    assert outcomes == ["failed"] * MAX_RUNS + ["skipped"]
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert submission.status == "error" and submission.score is None
        assert "a bug in the checks" in submission.runs[0].error
        reopen(submission)  # the checks are fixed; an instructor grades it again
        session.commit()
    assert grade(database, executor, catalogue, submission_id) == "graded"
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert submission.score == submission.max_score and len(submission.runs) == MAX_RUNS + 1


def test_a_grader_that_cannot_start_is_a_failed_run_not_a_crash(database, catalogue, tmp_path):
    submission_id = submit(database, REFERENCE_Q)
    executor = LocalExecutor(Settings(course_python="/nonexistent/python", spool_dir=str(tmp_path)))
    assert grade(database, executor, catalogue, submission_id) == "failed"
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert submission.status == "queued" and submission.score is None
        assert submission.runs[0].executor == "local"
        assert "cannot run /nonexistent/python" in submission.runs[0].error
