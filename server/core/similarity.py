"""Code similarity of an exercise's submissions, for its staff: which submissions to compare (each
student's counted one), the text each is compared as, and asking a worker to compare them
(worker/grading/similarity.py does, with copydetect). What it finds is a lead for a person to
read, never a grade: nothing here touches a score."""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict

from celery import Celery
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core import task_names
from server.core.grades import Grade
from server.core.models import (
    CourseRole,
    Enrolment,
    Exercise,
    SimilarityRun,
    Submission,
    User,
    utcnow,
)
from worker.harness.submission import Unreadable, read

log = logging.getLogger(__name__)
# a submission is compared as text: one larger than this (a notebook with outputs is mostly
# its outputs, which are not compared) is left out
MAX_SOURCE_BYTES = 4 * 1024 * 1024
# a comparison asked for while another of the exercise is under way for less than this is the
# same one: a second click waits for the first; one older than it was lost with its worker
UNDER_WAY_SECONDS = 900


def compared_text(submission: Submission) -> str | None:
    """The code a submission is compared as, and shown as beside another: a .py file as it is; a
    notebook's code cells in order, each under a comment naming it (a comment is not compared).
    None where the file is not readable code."""
    try:
        source = read(submission.code, submission.filename, MAX_SOURCE_BYTES)
    except Unreadable:
        return None
    if not source.notebook:
        return source.cells[0][1]
    return "\n\n".join(f"# {name}\n{code}" for name, code in source.cells)


def counted_submissions(session: Session, exercise: Exercise) -> dict[int, int]:
    """Student's user id → the submission of theirs that counts on the exercise: their best (as
    the gradebook picks it), else their latest where none is graded. A grade an instructor set
    by hand still leaves the student's code to compare: the same submission."""
    grades: dict[int, Grade] = defaultdict(Grade)
    latest: dict[int, int] = {}
    students = select(Enrolment.user_id).where(
        Enrolment.course_id == exercise.course_id, Enrolment.role == CourseRole.student.value
    )
    for row in session.execute(
        select(
            Submission.id,
            Submission.user_id,
            Submission.counted_score,
            Submission.max_score,
            Submission.override_score,
        )
        .where(Submission.exercise_id == exercise.id, Submission.user_id.in_(students))
        .order_by(Submission.id)
    ):
        grades[row.user_id].add(
            row.id, row.counted_score, row.max_score, row.override_score is not None
        )
        latest[row.user_id] = row.id
    return {user_id: grades[user_id].best_id or latest[user_id] for user_id in latest}


def last_runs(
    session: Session, exercise_id: int
) -> tuple[SimilarityRun | None, SimilarityRun | None]:
    """(the exercise's last finished comparison, one under way since), either may be None."""
    runs = session.scalars(
        select(SimilarityRun)
        .where(SimilarityRun.exercise_id == exercise_id)
        .order_by(SimilarityRun.id.desc())
        .limit(20)
    ).all()
    finished = next((run for run in runs if run.finished_at is not None), None)
    pending = next(
        (
            run
            for run in runs
            if run.finished_at is None
            and (finished is None or run.id > finished.id)
            and _recent(run.requested_at)
        ),
        None,
    )
    return finished, pending


def _recent(moment: dt.datetime) -> bool:
    return utcnow() - moment < dt.timedelta(seconds=UNDER_WAY_SECONDS)


def request_comparison(celery: Celery, session: Session, exercise: Exercise, staff: User) -> bool:
    """Ask a worker to compare the exercise's counted submissions, once the request is
    committed; one already under way is not asked again. False if the broker is away (the
    request is then withdrawn: the page does not show a comparison that nobody will make)."""
    if last_runs(session, exercise.id)[1] is not None:
        return True
    run = SimilarityRun(exercise_id=exercise.id, requested_by=staff.id)
    session.add(run)
    session.commit()
    try:
        celery.send_task(task_names.SIMILARITY, args=[run.id], retry=False)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("similarity of exercise %s not sent: broker unavailable (%s)", exercise.id, exc)
        session.delete(run)
        session.commit()
        return False
    return True
