"""Grading one submission into the database: claim a run, grade it, record the report.

Idempotent per submission: a duplicate delivery finds the submission graded, or running under
another worker's lease, and does nothing. A worker that died leaves a run whose lease runs out;
the next claim marks it lost and starts a new run. A grader failure is never a grade: the
submission goes back to `queued` for another run, and only after MAX_RUNS runs to `error`.
"""
from __future__ import annotations

import datetime as dt
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.orm import Session

from server.db import Database
from server.models import (CheckResult, DiagnosticResult, GradingRun, Submission, SubmissionStatus,
                           utcnow)
from worker.catalogue import ExerciseInfo
from worker.executors import Executor
from worker.harness.jobs import Job

MAX_RUNS = 3
DONE = (SubmissionStatus.graded.value, SubmissionStatus.error.value)


@dataclass(frozen=True)
class Claim:
    """What a worker needs to grade a claimed run, read inside the claiming transaction."""

    run_id: int
    submission_id: int
    exercise: str
    filename: str
    code: bytes


def claim(session: Session, submission_id: int, executor: str, worker: str,
          lease: dt.timedelta, now: dt.datetime | None = None) -> Claim | None:
    now = now or utcnow()
    submission = session.get(Submission, submission_id, with_for_update=True)
    if submission is None or submission.status in DONE:
        return None
    runs = submission.runs
    if runs and runs[-1].status == "running":
        if runs[-1].lease_until > now and not _gone(runs[-1].worker):
            return None
        runs[-1].status, runs[-1].finished_at = "lost", now
        runs[-1].error = f"{runs[-1].worker} stopped before finishing"
    if len(runs) - submission.retry_from >= MAX_RUNS:
        submission.status = SubmissionStatus.error.value
        return None
    run = GradingRun(submission=submission, attempt=len(runs) + 1, executor=executor,
                     status="running", worker=worker, started_at=now, lease_until=now + lease)
    submission.status = SubmissionStatus.running.value
    session.add(run)
    session.flush()
    return Claim(run.id, submission.id, submission.exercise.slug, submission.filename,
                 submission.code)


def reopen(submission: Submission) -> None:
    """Grade a finished submission again (a staff regrade, e.g. after fixing an exercise's checks):
    its runs so far stop counting toward MAX_RUNS, and its last grade stands until the new one."""
    submission.retry_from = len(submission.runs)
    submission.status = SubmissionStatus.queued.value
    submission.enqueued_at = None


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _gone(worker: str | None) -> bool:
    """A worker process of this host that no longer exists (a redelivery after it was killed)."""
    host, _, pid = (worker or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def record(session: Session, run_id: int, report: dict, now: dt.datetime | None = None) -> str:
    """Store a report for a run that is still the submission's current one; returns the outcome."""
    now = now or utcnow()
    run = session.get(GradingRun, run_id, with_for_update=True)
    submission = run.submission
    if run.status != "running" or submission.status in DONE:
        return "stale"  # another run took over: its result stands
    run.finished_at = now
    if report.get("status") != "graded":
        run.status, run.error = "failed", str(report.get("error") or "the grader failed")
        submission.status = (SubmissionStatus.queued.value
                             if run.attempt - submission.retry_from < MAX_RUNS
                              else SubmissionStatus.error.value)
        return "failed"
    run.status = "done"
    run.environment, run.sandbox = report.get("environment"), report.get("sandbox")
    run.timing, run.notes, run.output = report.get("timing"), report.get("notes"), report.get("output")
    for position, check in enumerate(report["checks"]):
        run.checks.append(CheckResult(
            position=position, name=check["name"], title=check["title"], points=check["points"],
            max_points=check["max_points"], passed=check["passed"], message=check["message"],
            titles=check.get("titles"),
            diagnostics=[DiagnosticResult(code=d["code"], message=d["message"], hint=d["hint"],
                                          details=d["details"], translations=d["translations"])
                         for d in check["diagnostics"]]))
    submission.score = report["score"] * (1 - submission.penalty)
    submission.max_score = report["max_score"]
    submission.status = SubmissionStatus.graded.value
    return "graded"


def grade(database: Database, executor: Executor, catalogue: dict[str, ExerciseInfo],
          submission_id: int, *, worker: str, lease: dt.timedelta) -> str:
    """Claim, grade with the executor, record. Returns graded, failed, stale or skipped."""
    with database.sessions.begin() as session:
        claimed = claim(session, submission_id, executor.name, worker, lease)
    if claimed is None:
        return "skipped"
    info = catalogue.get(claimed.exercise)
    with tempfile.TemporaryDirectory(prefix="hpcgrade-spool-") as spool:
        path = Path(spool) / f"submission{Path(claimed.filename).suffix}"
        path.write_bytes(claimed.code)
        if info is None:
            report = {"status": "error", "error": f"exercise {claimed.exercise} is not installed"}
        else:
            report = executor.grade(Job(
                exercise=info.slug, exercise_dir=str(info.path), submission=str(path),
                filename=claimed.filename, limits=info.limits, id=str(claimed.run_id)))
    with database.sessions.begin() as session:
        return record(session, claimed.run_id, report)
