"""What a student may see of a submission, as plain data for the API and the pages."""
from __future__ import annotations

import datetime as dt
import json
from typing import NamedTuple

from flask import current_app
from sqlalchemy import bindparam, func, select
from sqlalchemy.orm import Session, selectinload

from worker.harness.submission import Unreadable, read

from .models import CheckResult, Exercise, GradingRun, Submission, SubmissionStatus, User
from .queue import place
from .submissions import COUNTS_AS_ATTEMPT

WAITING = (SubmissionStatus.queued.value, SubmissionStatus.running.value)
OWN_FIRST = ("Your earlier submissions are graded first; this one starts when one of them "
             "finishes.",
             "Tus entregas anteriores se corrigen primero; esta empieza cuando termine una de "
             "ellas.")


class SubmissionState(NamedTuple):
    """A submission's row, without its code or results: enough to authorise and answer a poll."""

    id: int
    user_id: int
    exercise: str
    filename: str
    status: str
    submitted_at: dt.datetime
    score: float | None
    max_score: float | None
    late_days: int
    penalty: float
    done_run_id: int | None


# built once: composing a statement costs about as much as running it, and polls are many
_DONE_RUN = (select(func.max(GradingRun.id))
             .where(GradingRun.submission_id == Submission.id, GradingRun.status == "done")
             .scalar_subquery())
_STATE = (select(Submission.id, Submission.user_id, Exercise.slug, Submission.filename,
                 Submission.status, Submission.submitted_at, Submission.score,
                 Submission.max_score, Submission.late_days, Submission.penalty, _DONE_RUN)
          .join(Exercise, Submission.exercise_id == Exercise.id)
          .where(Submission.id == bindparam("submission_id")))
_CHECKS = (selectinload(GradingRun.checks).selectinload(CheckResult.diagnostics),)


def may_see(owner_id: int, viewer_id: int, viewer_is_staff: bool) -> bool:
    """A submission is its student's and the staff's; to anyone else it does not exist (404)."""
    return owner_id == viewer_id or viewer_is_staff


def submission_state(session: Session, submission_id: int) -> SubmissionState | None:
    # Core, not the ORM: the row is plain values, and polls are the service's hottest path
    row = session.connection().execute(_STATE, {"submission_id": submission_id}).one_or_none()
    return SubmissionState(*row) if row is not None else None


def waiting(session: Session, state: SubmissionState | Submission, lang: str) -> dict:
    """Where a queued submission stands: `queue_position` (1 for the next to be graded; None
    once grading has started) and a `note` when it waits for its student's earlier ones."""
    found = place(session, state.id) if state.status == SubmissionStatus.queued.value else None
    if found is None:
        return {"queue_position": None, "note": None}
    position, turn = found
    behind_own = turn > current_app.config["MAX_RUNNING_PER_STUDENT"]
    return {"queue_position": position, "note": OWN_FIRST[lang == "es"] if behind_own else None}


class ResultCache:
    """Finished submissions' results as JSON, per process. A result changes only with the
    submission's status or a new grading run, and both are part of the key."""

    def __init__(self, size: int = 4096):
        self._bodies: dict[tuple, str] = {}
        self._size = size

    def get_or_build(self, session: Session, state: SubmissionState, lang: str) -> str:
        if state.status in WAITING:
            return _json(submission_dict(session, state, lang))
        key = (state.id, state.status, state.done_run_id, lang)
        body = self._bodies.get(key)
        if body is None:
            if len(self._bodies) >= self._size:
                self._bodies.clear()
            body = self._bodies[key] = _json(submission_dict(session, state, lang))
        return body


def _json(data: dict) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def submission_dict(session: Session, state: SubmissionState, lang: str) -> dict:
    """The submission as its student sees it: two queries while it waits, four once graded."""
    data = {
        "id": state.id, "exercise": state.exercise, "filename": state.filename,
        "status": state.status, "submitted_at": state.submitted_at.isoformat(),
        **waiting(session, state, lang),
        "score": state.score, "max_score": state.max_score,
        "late_days": state.late_days, "penalty": state.penalty,
        "checks": [], "notes": [], "output": "",
    }
    if state.status == SubmissionStatus.cancelled.value:
        data["message"] = ("El profesorado detuvo la corrección de esta entrega; no es una nota."
                           if lang == "es" else
                           "The instructors stopped the grading of this submission; this is not "
                           "a grade.")
    if state.status == SubmissionStatus.error.value:
        data["message"] = ("El corrector falló repetidamente; tu entrega está guardada y el "
                           "profesorado lo revisará. No es una nota." if lang == "es" else
                           "The grader failed repeatedly; your submission is kept and the "
                           "instructors will look at it. This is not a grade.")
    if state.done_run_id is not None:
        run = session.get(GradingRun, state.done_run_id, options=_CHECKS)
        data["checks"] = [{
            "name": c.name, "title": (c.titles or {}).get(lang, c.title), "points": c.points, "max_points": c.max_points,
            "passed": c.passed,
            "diagnostics": [{"code": d.code, "details": d.details,
                             **d.translations.get(lang, {"message": d.message, "hint": d.hint})}
                            for d in c.diagnostics]} for c in run.checks]
        data["notes"], data["output"] = run.notes or [], run.output or ""
    return data


def exercise_rows(session: Session, user: User) -> list[dict]:
    """Active exercises with the user's best score and attempts used."""
    stats = dict((row[0], row[1:]) for row in session.execute(
        select(Submission.exercise_id, func.max(Submission.score), func.count())
        .where(Submission.user_id == user.id, COUNTS_AS_ATTEMPT)
        .group_by(Submission.exercise_id)))
    rows = []
    for exercise in session.scalars(select(Exercise).where(Exercise.active).order_by(Exercise.slug)):
        best, used = stats.get(exercise.id, (None, 0))
        rows.append({"exercise": exercise, "best": best, "attempts_used": used,
                     "attempts_left": None if exercise.max_attempts is None
                     else max(exercise.max_attempts - used, 0)})
    return rows


def code_cells(submission: Submission) -> list[tuple[str, str]]:
    """The code as the grader read it: the .py file, or a notebook's code cells."""
    try:
        return list(read(submission.code, submission.filename, len(submission.code)).cells)
    except Unreadable as exc:
        return [(submission.filename, exc.en)]
