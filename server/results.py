"""What a student may see of a submission, as plain data for the API and the pages."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from worker.harness.submission import Unreadable, read

from .models import Exercise, Submission, SubmissionStatus, User

WAITING = (SubmissionStatus.queued.value, SubmissionStatus.running.value)


def queue_position(session: Session, submission: Submission) -> int | None:
    """1 for the next to be graded; None once grading has started."""
    if submission.status != SubmissionStatus.queued.value:
        return None
    ahead = session.scalar(select(func.count()).select_from(Submission).where(
        Submission.status == SubmissionStatus.queued.value, Submission.id < submission.id))
    return ahead + 1


def submission_dict(session: Session, submission: Submission, lang: str) -> dict:
    run = next((r for r in reversed(submission.runs) if r.status == "done"), None)
    data = {
        "id": submission.id, "exercise": submission.exercise.slug, "filename": submission.filename,
        "status": submission.status, "submitted_at": submission.submitted_at.isoformat(),
        "queue_position": queue_position(session, submission),
        "score": submission.score, "max_score": submission.max_score,
        "late_days": submission.late_days, "penalty": submission.penalty,
        "checks": [], "notes": [], "output": "",
    }
    if submission.status == SubmissionStatus.error.value:
        data["message"] = ("El corrector falló repetidamente; tu entrega está guardada y el "
                           "profesorado lo revisará. No es una nota." if lang == "es" else
                           "The grader failed repeatedly; your submission is kept and the "
                           "instructors will look at it. This is not a grade.")
    if run is not None:
        data["checks"] = [{
            "name": c.name, "title": c.title, "points": c.points, "max_points": c.max_points,
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
        .where(Submission.user_id == user.id).group_by(Submission.exercise_id)))
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
