"""How a grading run's score becomes a submission's (the late penalty, the run a result comes
from; server/core/runs.py makes a run the result), how scores become a student's grade on an
exercise, and the deadline and attempts a student has there, their accommodation and allowance
included. Shared by the portal and the workers."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.catalogue import current_info
from server.core.courses import exercise_folder, role_in
from server.core.models import (
    Accommodation,
    Allowance,
    Exercise,
    GradingRun,
    RunStatus,
    SetGrade,
    Submission,
)

# the id of a submission's latest finished run, the one its grade and its result page come from
# (in a query of submissions; None while it has none). Tied to the query's submission only, so
# that a query which also joins runs gets the latest, not each of its own
DONE_RUN = (
    select(func.max(GradingRun.id))
    .where(GradingRun.submission_id == Submission.id, GradingRun.status == RunStatus.done.value)
    .correlate(Submission)
    .scalar_subquery()
)


def penalised(run_score: float, penalty: float) -> float:
    """A run's score as its submission's grade: less the late penalty (the fraction lost)."""
    return run_score * (1 - penalty)


@dataclass
class Grade:
    """A student's grade on an exercise, from their submissions added one by one.

    The rule: a grade an instructor set for the student on the exercise (`SetGrade`) is the
    grade, whatever they submit, until it is removed; otherwise the best score of their
    submissions, each counted as an instructor adjusted it, if one did, else as graded (after
    its late penalty). The best submission is followed either way, for the pages' "your best"."""

    best: float | None = None
    best_id: int | None = None
    max_score: float | None = None
    best_adjusted: bool = False  # the best submission's score is an instructor's adjustment
    set_grade: SetGrade | None = None

    def add(
        self,
        submission_id: int,
        counted_score: float | None,
        max_score: float | None,
        adjusted: bool,
    ) -> None:
        if counted_score is not None and (self.best is None or counted_score > self.best):
            self.best, self.best_id, self.best_adjusted = counted_score, submission_id, adjusted
            self.max_score = max_score

    def set_by(self, row: SetGrade, max_points: float | None) -> None:
        """The grade an instructor set; it is out of what the exercise is (where known)."""
        self.set_grade = row
        self.max_score = self.max_score if max_points is None else max_points

    @property
    def set_by_hand(self) -> bool:
        return self.set_grade is not None

    @property
    def score(self) -> float | None:
        return self.set_grade.score if self.set_grade is not None else self.best

    @property
    def submission_id(self) -> int | None:
        """The submission whose score is the grade: none when an instructor set the grade."""
        return None if self.set_grade is not None else self.best_id


def student_grade(session: Session, user_id: int, exercise_id: int) -> Grade:
    """One student's grade on one exercise."""
    grade = Grade()
    for row in session.execute(
        select(
            Submission.id, Submission.counted_score, Submission.max_score, Submission.override_score
        )
        .where(Submission.user_id == user_id, Submission.exercise_id == exercise_id)
        .order_by(Submission.id)
    ):
        grade.add(row.id, row.counted_score, row.max_score, row.override_score is not None)
    set_grade = session.scalar(
        select(SetGrade).where(SetGrade.user_id == user_id, SetGrade.exercise_id == exercise_id)
    )
    if set_grade is not None:
        exercise = session.get(Exercise, exercise_id)
        grade.set_by(set_grade, maximum_points(session, [exercise])[exercise_id])
    return grade


def setter_role(session: Session, row: SetGrade) -> str | None:
    """The course role of whoever set the grade, which the student reads (staff_role)."""
    return staff_role(session, row.set_by, row.exercise_id)


def staff_role(session: Session, user_id: int | None, exercise_id: int) -> str | None:
    """The role in the exercise's course ("ta" or "instructor", an admin's being instructor) of
    whoever set a grade or adjusted a score; None once they are no longer in the course."""
    if user_id is None:
        return None
    course_id = session.scalar(select(Exercise.course_id).where(Exercise.id == exercise_id))
    return role_in(session, user_id, course_id)


def maximum_points(session: Session, of: list[Exercise]) -> dict[int, float | None]:
    """exercise id → what the exercise is out of: its checks' points added up, or, where the
    catalogue cannot tell (its folder broken, points not written as numbers), the largest
    maximum any of its submissions was graded out of (None before any was graded)."""
    known = {
        exercise.id: info.max_points if (info := current_info(exercise_folder(exercise))) else None
        for exercise in of
    }
    unknown = [exercise_id for exercise_id, points in known.items() if points is None]
    if unknown:
        known.update(
            session.execute(
                select(Submission.exercise_id, func.max(Submission.max_score))
                .where(Submission.exercise_id.in_(unknown))
                .group_by(Submission.exercise_id)
            ).all()
        )
    return known


# --- the deadline and attempts a student has, and what lateness costs ---------------------

# an accommodation's bounds: the form refuses more, and deadline reminders look this far back
MAX_EXTRA_DAYS = 60
MAX_ATTEMPTS_FACTOR = 10


@dataclass(frozen=True)
class Terms:
    """The deadline and attempt limit a student has on an exercise, their accommodation and
    allowance included."""

    deadline: dt.datetime | None
    max_attempts: int | None
    allowance: Allowance | None
    accommodation: Accommodation | None = None

    def attempts_left(self, used: int) -> int | None:
        return None if self.max_attempts is None else max(self.max_attempts - used, 0)


def terms(
    exercise: Exercise, allowance: Allowance | None, accommodation: Accommodation | None = None
) -> Terms:
    """The one rule every page, refusal, late penalty and reminder uses. The accommodation
    first, on the exercise's own terms: its extra days after the deadline, the limit of
    attempts times its factor, rounded up. Then the allowance on top: an extension moves the
    deadline later, never earlier (the exercise's own, or the accommodated one, may be later
    than the date granted); extra attempts add to the limit, and there is none to add to
    without one."""
    deadline, attempts = exercise.deadline, exercise.max_attempts
    if accommodation is not None:
        if deadline is not None:
            deadline += dt.timedelta(days=accommodation.extra_days)
        if attempts is not None:
            # rounded first: 10 × 1.1 is 11.000000000000002 in floating point, not 12 attempts
            attempts = math.ceil(round(attempts * accommodation.attempts_factor, 6))
    if allowance is not None:
        if allowance.deadline is not None and deadline is not None:
            deadline = max(deadline, allowance.deadline)
        if attempts is not None:
            attempts += allowance.extra_attempts
    return Terms(deadline, attempts, allowance, accommodation)


def student_terms(session: Session, user_id: int, exercise: Exercise) -> Terms:
    return terms(
        exercise,
        session.scalar(
            select(Allowance).where(
                Allowance.user_id == user_id, Allowance.exercise_id == exercise.id
            )
        ),
        accommodation_of(session, user_id, exercise.course_id),
    )


def terms_of(session: Session, user_id: int, exercises: list[Exercise]) -> dict[int, Terms]:
    """exercise id → the student's terms there, for a page's list of exercises of one course,
    in two queries."""
    granted = {
        row.exercise_id: row
        for row in session.scalars(select(Allowance).where(Allowance.user_id == user_id))
    }
    accommodated = {
        course_id: accommodation_of(session, user_id, course_id)
        for course_id in {exercise.course_id for exercise in exercises}
    }
    return {
        exercise.id: terms(exercise, granted.get(exercise.id), accommodated[exercise.course_id])
        for exercise in exercises
    }


def accommodation_of(session: Session, user_id: int, course_id: int) -> Accommodation | None:
    return session.scalar(
        select(Accommodation).where(
            Accommodation.user_id == user_id, Accommodation.course_id == course_id
        )
    )


def lateness(
    exercise: Exercise, deadline: dt.datetime | None, moment: dt.datetime
) -> tuple[int, float]:
    """(started days late, fraction of the score lost) of work sent at `moment`, by the student's
    deadline (the exercise's, or their extension's). Only the penalty policy takes points: work
    that the refuse policy let in (before the deadline, or in an extension) loses none."""
    if exercise.deadline_policy != "penalty" or deadline is None or moment <= deadline:
        return 0, 0.0
    days = math.ceil((moment - deadline) / dt.timedelta(days=1))
    return days, min(1.0, days * exercise.penalty_per_day)


def reassess_lateness(session: Session, user_id: int, exercise: Exercise) -> None:
    """The student's deadline moved (an allowance or accommodation granted, changed or removed):
    each of their submissions of the exercise is late by the new one, as if sent under it, and a
    graded one's score is its latest run's with the new penalty, as grading works it out."""
    deadline = student_terms(session, user_id, exercise).deadline
    for submission, run in session.execute(
        select(Submission, GradingRun)
        .outerjoin(GradingRun, GradingRun.id == DONE_RUN)
        .where(Submission.user_id == user_id, Submission.exercise_id == exercise.id)
    ):
        submission.late_days, submission.penalty = lateness(
            exercise, deadline, submission.submitted_at
        )
        if run is not None:
            # runs recorded before their score was kept (migration 0006): their checks' points
            score = run.score if run.score is not None else sum(c.points for c in run.checks)
            submission.score = penalised(score, submission.penalty)
