"""The course as instructors see it: every student's best score per exercise, and which
diagnostics the students hit, as plain data for the staff pages and the grade export."""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import distinct, func, select
from sqlalchemy.orm import Session

from .models import (CheckResult, DiagnosticResult, Exercise, GradingRun, Role, Submission,
                     SubmissionStatus, User)
from .results import WAITING

FULL_MARKS_SLACK = 1e-9
# the figures are the students'; what instructors submit to try an exercise out does not count
STUDENT = User.role == Role.student.value


@dataclass
class Standing:
    """One student on one exercise."""

    attempts: int = 0
    best: float | None = None
    max_score: float | None = None
    latest_id: int | None = None
    latest_status: str | None = None
    latest_at: dt.datetime | None = None
    best_id: int | None = None


@dataclass
class ExerciseSummary:
    exercise: Exercise
    submissions: int = 0
    students: int = 0
    mean_best: float | None = None
    full_marks: int = 0
    waiting: int = 0
    errors: int = 0
    # code → how many students got it on at least one graded submission, most frequent first
    diagnostics: list[tuple[str, int]] = field(default_factory=list)


def students(session: Session) -> list[User]:
    return list(session.scalars(select(User).where(STUDENT).order_by(User.username)))


def exercises(session: Session) -> list[Exercise]:
    return list(session.scalars(select(Exercise).where(Exercise.active).order_by(Exercise.slug)))


def standings(session: Session, exercise_id: int | None = None) -> dict[tuple[int, int], Standing]:
    """(user id, exercise id) → the student's standing; one pass over the submissions."""
    query = select(Submission.id, Submission.user_id, Submission.exercise_id, Submission.status,
                   Submission.score, Submission.max_score, Submission.submitted_at) \
        .join(User, Submission.user_id == User.id).where(STUDENT).order_by(Submission.id)
    if exercise_id is not None:
        query = query.where(Submission.exercise_id == exercise_id)
    table: dict[tuple[int, int], Standing] = defaultdict(Standing)
    for row in session.execute(query):
        standing = table[(row.user_id, row.exercise_id)]
        standing.attempts += 1
        standing.latest_id, standing.latest_status, standing.latest_at = \
            row.id, row.status, row.submitted_at
        if row.score is not None and (standing.best is None or row.score > standing.best):
            standing.best, standing.max_score, standing.best_id = row.score, row.max_score, row.id
    return dict(table)


def diagnostic_counts(session: Session, exercise_id: int | None = None
                      ) -> dict[int, list[tuple[str, int, int]]]:
    """exercise id → [(code, students, submissions)], most students first."""
    query = (select(Submission.exercise_id, DiagnosticResult.code,
                    func.count(distinct(Submission.user_id)), func.count(distinct(Submission.id)))
             .join(CheckResult, DiagnosticResult.check_id == CheckResult.id)
             .join(GradingRun, CheckResult.run_id == GradingRun.id)
             .join(Submission, GradingRun.submission_id == Submission.id)
             .join(User, Submission.user_id == User.id)
             .where(GradingRun.status == "done", STUDENT)
             .group_by(Submission.exercise_id, DiagnosticResult.code))
    if exercise_id is not None:
        query = query.where(Submission.exercise_id == exercise_id)
    counts: dict[int, list[tuple[str, int, int]]] = defaultdict(list)
    for exercise, code, by_students, by_submissions in session.execute(query):
        counts[exercise].append((code, by_students, by_submissions))
    for rows in counts.values():
        rows.sort(key=lambda row: (-row[1], -row[2], row[0]))
    return dict(counts)


def summaries(session: Session) -> list[ExerciseSummary]:
    table = standings(session)
    codes = diagnostic_counts(session)
    status_counts = {(exercise_id, status): n for exercise_id, status, n in session.execute(
        select(Submission.exercise_id, Submission.status, func.count())
        .join(User, Submission.user_id == User.id).where(STUDENT)
        .group_by(Submission.exercise_id, Submission.status))}
    result = []
    for exercise in exercises(session):
        mine = [s for (_, exercise_id), s in table.items() if exercise_id == exercise.id]
        bests = [s.best for s in mine if s.best is not None]
        result.append(ExerciseSummary(
            exercise=exercise, submissions=sum(s.attempts for s in mine), students=len(mine),
            mean_best=sum(bests) / len(bests) if bests else None,
            full_marks=sum(1 for s in mine if s.best is not None
                           and s.best >= s.max_score - FULL_MARKS_SLACK),
            waiting=sum(status_counts.get((exercise.id, status), 0) for status in WAITING),
            errors=status_counts.get((exercise.id, SubmissionStatus.error.value), 0),
            diagnostics=[(code, n) for code, n, _ in codes.get(exercise.id, [])]))
    return result


def gradebook(session: Session) -> tuple[list[Exercise], list[tuple[User, list[Standing | None]]]]:
    """Every student (even one who never submitted) against every active exercise."""
    columns = exercises(session)
    table = standings(session)
    return columns, [(student, [table.get((student.id, e.id)) for e in columns])
                     for student in students(session)]


@dataclass(frozen=True)
class RunRow:
    """One grading run, as staff read it: where it went and how long it waited and ran."""

    attempt: int
    status: str
    error: str | None
    executor: str
    job: str | None
    job_state: str | None
    node: str | None
    device: str | None
    started_at: dt.datetime
    queue_wait: float | None  # seconds from dispatch to the grader taking it
    run_time: float | None


def run_rows(submission: Submission) -> list[RunRow]:
    rows = []
    for run in submission.runs:
        environment, timing = run.environment or {}, run.timing or {}
        graded_from = timing.get("started_at")
        device = environment.get("gpu") or environment.get("device")
        rows.append(RunRow(
            run.attempt, run.status, run.error, run.executor, run.external_id, run.job_state,
            environment.get("node") or run.node,
            f"{device} · torch {environment['torch']}" if device and environment.get("torch")
            else device,
            run.started_at,
            max(graded_from - run.started_at.timestamp(), 0.0) if graded_from else None,
            timing.get("total")))
    return rows
