"""A course with grades already in, written straight to the database (no grader runs), for the
tests of the gradebook, the course page and the charts (tests/web/: test_gradebook.py,
test_charts.py)."""

import datetime as dt
import hashlib

import pytest
from helpers import the_course
from sqlalchemy import select

from server.core.models import (
    CheckResult,
    DiagnosticResult,
    Exercise,
    GradingRun,
    Submission,
    User,
    utcnow,
)
from server.core.users import add_user

START = dt.datetime(2026, 11, 23, 17, 0, tzinfo=dt.timezone.utc)


def submit(
    session,
    user: User,
    exercise: Exercise,
    score: float | None,
    *,
    codes=(),
    load_errors=(),
    filename: str = "work.py",
    code: bytes = b"x = 1\n",
    override: float | None = None,
    status: str = "graded",
    minutes: int = 0,
) -> Submission:
    """A submission graded out of 10, its run giving the diagnostics `codes` on its check and
    `load_errors` in its notes, as the harness says why a file did not load or lacks a function."""
    submission = Submission(
        user_id=user.id,
        exercise_id=exercise.id,
        filename=filename,
        code=code,
        sha256=hashlib.sha256(code).hexdigest(),
        status=status,
        score=score,
        max_score=10.0 if score is not None else None,
        override_score=override,
        override_at=None if override is None else START + dt.timedelta(minutes=minutes + 1),
        submitted_at=START + dt.timedelta(minutes=minutes),
    )
    session.add(submission)
    session.flush()
    if score is not None:
        run = GradingRun(
            submission_id=submission.id,
            attempt=1,
            executor="local",
            status="done",
            lease_until=utcnow(),
            score=score,
            max_score=10.0,
        )
        run.checks = [
            CheckResult(
                position=0,
                name="all",
                title="all",
                points=score,
                max_points=10.0,
                passed=not codes and not load_errors,
                diagnostics=[
                    DiagnosticResult(
                        code=code_,
                        message=f"`{code_}` in English",
                        hint="",
                        details={},
                        translations={"es": {"message": f"`{code_}` en español", "hint": ""}},
                    )
                    for code_ in codes
                ],
            )
        ]
        run.notes = [
            {
                "kind": "load-error",
                "code": code_,
                "message": f"`{code_}` in English",
                "hint": "",
                "details": {},
                "translations": {
                    "en": {"message": f"`{code_}` in English", "hint": ""},
                    "es": {"message": f"`{code_}` en español", "hint": ""},
                },
            }
            for code_ in load_errors
        ]
        session.add(run)
    session.flush()
    return submission


@pytest.fixture
def marked_course(course):
    """autograd-q (out of 10): ana 4 then 10; bea 3 with two diagnostics, overridden to 6;
    carl nothing; prof (an instructor) 2, left out of every figure. metrics: ana 5; bea a
    notebook, still queued. Returns the app and the submissions by name."""
    database = course.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        pytorch = the_course(session)
        add_user(
            session,
            "carl",
            "Carl Ruiz",
            "carl@example.org",
            "student",
            "long-password",
            course=pytorch,
        )
        add_user(
            session, "prof", "Pilar", "p@uni.es", "instructor", "long-password", course=pytorch
        )
        users = {u.username: u for u in session.scalars(select(User))}
        exercises = {
            e.slug: e
            for e in session.scalars(select(Exercise).where(Exercise.course_id == pytorch.id))
        }
        q, metrics = exercises["autograd-q"], exercises["metrics"]
        made = {
            "ana-q-1": submit(session, users["ana"], q, 4, codes=["grad-sign-flipped"]),
            "ana-q-2": submit(session, users["ana"], q, 10, code=b"ana = 2\n", minutes=5),
            "bea-q": submit(
                session,
                users["bea"],
                q,
                3,
                override=6,
                minutes=7,
                codes=["grad-sign-flipped"],
                load_errors=["missing-function"],
            ),
            "prof-q": submit(session, users["prof"], q, 2, codes=["grad-sign-flipped"]),
            "ana-metrics": submit(session, users["ana"], metrics, 5),
            "bea-metrics": submit(
                session,
                users["bea"],
                metrics,
                None,
                status="queued",
                filename="work.ipynb",
                code=b'{"cells": []}',
            ),
        }
        ids = {name: submission.id for name, submission in made.items()}
    return course, ids
