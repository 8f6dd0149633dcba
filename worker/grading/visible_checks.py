"""A student's "Check" from the portal: the exercise's visible checks run on the worker, using no
attempt. This module alone writes a check's status after the web adds it ("queued").

The web commits the check and sends `hpcgrade.visible_check` after the commit. The task gives
way while graded work waits (a check is nobody's grade), for WAIT_FOR_GRADED at most; then it
takes the check ("running"), runs the visible checks in the worker's own warm harness for the
course's python, with the sandbox's required layers as a grade has them (the code is as hostile
as a submission's), names a known wrong program as `hpcgrade check` does, and stores the
report: "done", or "failed" when the grader itself could not run them. No transaction is held
while the checks run. A check left "running" by a worker that died is taken again STALE after it
started (its page sends the task again), and given up after MAX_TAKES.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from server.core.catalogue import current_info
from server.core.config import Settings
from server.core.courses import exercise_folder
from server.core.models import (
    Submission,
    SubmissionStatus,
    VisibleCheck,
    VisibleCheckStatus,
    aware,
    utcnow,
)
from worker.grading.shapes import Shape, course_shape
from worker.harness import spool, visible_mistakes
from worker.harness.jobs import Job
from worker.harness.report import Report
from worker.harness.submission import Unreadable, read

WAIT_FOR_GRADED = dt.timedelta(seconds=30)
# longer than the task's hard time limit (server/core/queue.py): a check running longer has lost
# its worker; one taken MAX_TAKES times is given up
STALE, MAX_TAKES = dt.timedelta(minutes=7), 3
QUEUED, RUNNING = VisibleCheckStatus.queued.value, VisibleCheckStatus.running.value
# grade(job, python) → the harness's report: a local executor's warm harness (LocalExecutor.grade)
Grade = Callable[[Job, str | None], Report]


def graded_work_waits(session: Session) -> bool:
    return bool(
        session.scalar(select(exists().where(Submission.status == SubmissionStatus.queued.value)))
    )


@dataclass(frozen=True)
class Taken:
    """A check taken to run, with what it needs, read in the transaction that took it: none is
    held while it runs (on SQLite a write transaction would lock every other writer out)."""

    id: int
    started_at: dt.datetime
    exercise: str
    folder: Path
    shape: Shape
    filename: str
    code: bytes
    lang: str


def take(session: Session, settings: Settings, check_id: int, now: dt.datetime) -> Taken | None:
    """The check, now "running", if nobody runs it: queued, or left running by a worker that
    died (started before STALE); None otherwise (another worker's, or over). One taken
    MAX_TAKES times already is "failed": what ran it kept dying."""
    check = session.scalar(
        select(VisibleCheck)
        .where(
            VisibleCheck.id == check_id,
            (VisibleCheck.status == QUEUED)
            | ((VisibleCheck.status == RUNNING) & (VisibleCheck.started_at < now - STALE)),
        )
        .with_for_update()
    )
    if check is None:
        session.rollback()
        return None
    if check.takes >= MAX_TAKES:
        _store(check, Report.grader_error("the worker died running it", check.exercise.slug))
        session.commit()
        return None
    check.status, check.started_at, check.takes = RUNNING, now, check.takes + 1
    exercise = check.exercise
    taken = Taken(
        id=check.id,
        started_at=now,
        exercise=exercise.slug,
        folder=exercise_folder(exercise),
        shape=course_shape(exercise.course, settings.slurm_resources),
        filename=check.filename,
        code=check.code,
        lang=check.lang,
    )
    session.commit()
    return taken


def run(session: Session, settings: Settings, taken: Taken, grade: Grade) -> str:
    """Run a taken check, then store its report, unless another worker took it meanwhile;
    returns its status."""
    info = current_info(taken.folder)
    if info is None:
        report = Report.grader_error(f"exercise {taken.exercise} is not installed", taken.exercise)
    else:
        job = spool.write_run(
            settings.spool_dir,
            info.job(
                None,
                filename=taken.filename,
                seed=0,
                lang=taken.lang,
                job_id=f"check-{taken.id}",
                device="cpu",
                visible=True,
                required_layers=settings.sandbox_required_layers,
            ),
            taken.code,
        )
        try:
            report = grade(job, info.resources(taken.shape).python)
        finally:
            spool.remove_run(settings.spool_dir, job.id)
    stored = report.to_dict()
    if report.graded and info is not None:
        stored = visible_mistakes.recognised(
            stored, _mistakes(info.path), taken.lang, _cells(taken)
        )
    check = session.get(VisibleCheck, taken.id, with_for_update=True)
    if check is None or check.status != RUNNING or aware(check.started_at) != taken.started_at:
        session.rollback()
        return "taken over"
    _store(check, report, stored)
    session.commit()
    return check.status


def _store(check: VisibleCheck, report: Report, stored: dict | None = None) -> None:
    check.report = json.dumps(stored or report.to_dict())
    check.status = (
        VisibleCheckStatus.done.value if report.graded else VisibleCheckStatus.failed.value
    )
    check.finished_at = utcnow()


def _mistakes(folder) -> dict:
    try:
        return json.loads((folder / visible_mistakes.FILE).read_text())
    except (OSError, ValueError):
        return {}


def _cells(check: Taken) -> tuple[tuple[str, str], ...]:
    try:
        return read(check.code, check.filename, 1 << 30).cells
    except Unreadable:
        return ()
