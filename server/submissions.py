"""Accepting a submission: every check happens before anything is stored, then one commit.

What is refused is refused with a message in both languages and an HTTP status; what is
accepted is committed as `queued` before anything is queued, so it is never lost.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from .models import Exercise, Submission, SubmissionStatus, User

EXTENSIONS = (".py", ".ipynb")
# a submission whose grading staff stopped does not use up one of the student's attempts
COUNTS_AS_ATTEMPT = Submission.status != SubmissionStatus.cancelled.value


class Refusal(Exception):
    """Why a submission is not accepted: an HTTP status and a message in each language."""

    def __init__(self, status: int, en: str, es: str):
        super().__init__(en)
        self.status, self.en, self.es = status, en, es

    def message(self, lang: str) -> str:
        return self.es if lang == "es" else self.en


@dataclass(frozen=True)
class Rules:
    max_upload_kb: int
    per_window: int
    window_minutes: int

    @classmethod
    def from_config(cls, config: dict) -> "Rules":
        return cls(config["MAX_UPLOAD_KB"], config["SUBMISSIONS_PER_WINDOW"],
                   config["SUBMISSION_WINDOW_MINUTES"])


def late_penalty(exercise: Exercise, now: dt.datetime) -> tuple[int, float]:
    """(started days late, fraction of the score lost); refuses late work where the policy says so."""
    if exercise.deadline_policy == "none" or exercise.deadline is None or now <= exercise.deadline:
        return 0, 0.0
    if exercise.deadline_policy == "refuse":
        when = exercise.deadline.isoformat(timespec="minutes")
        raise Refusal(403, f"The deadline for this exercise passed ({when}); late work is not accepted.",
                      f"El plazo de este ejercicio terminó ({when}); no se aceptan entregas tardías.")
    days = math.ceil((now - exercise.deadline) / dt.timedelta(days=1))
    return days, min(1.0, days * exercise.penalty_per_day)


def check_file(filename: str, data: bytes, rules: Rules) -> None:
    if not filename.lower().endswith(EXTENSIONS):
        raise Refusal(400, "Upload a .py file or a Jupyter notebook (.ipynb).",
                      "Sube un archivo .py o un notebook de Jupyter (.ipynb).")
    if len(data) > rules.max_upload_kb << 10:
        raise Refusal(413, f"The file is larger than {rules.max_upload_kb} KB.",
                      f"El archivo supera los {rules.max_upload_kb} KB.")
    if not data.strip():
        raise Refusal(400, "The file is empty.", "El archivo está vacío.")
    if b"\x00" in data:
        raise Refusal(400, "The file is binary, not Python source or a notebook.",
                      "El archivo es binario, no código Python ni un notebook.")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal(400, "The file is not UTF-8 text; save it as UTF-8.",
                      "El archivo no es texto UTF-8; guárdalo como UTF-8.") from None


def accept(session: Session, user: User, exercise: Exercise | None, filename: str, data: bytes,
           rules: Rules, now: dt.datetime) -> Submission:
    """Validate and add a queued submission to the session (the caller commits)."""
    if exercise is None or not exercise.active:
        raise Refusal(404, "There is no such exercise.", "No existe ese ejercicio.")
    check_file(filename, data, rules)
    late_days, penalty = late_penalty(exercise, now)
    mine = select(func.count()).select_from(Submission).where(
        Submission.user_id == user.id, Submission.exercise_id == exercise.id)
    if exercise.max_attempts is not None \
            and session.scalar(mine.where(COUNTS_AS_ATTEMPT)) >= exercise.max_attempts:
        raise Refusal(403, f"You have used all {exercise.max_attempts} attempts for this exercise.",
                      f"Has agotado los {exercise.max_attempts} intentos de este ejercicio.")
    since = now - dt.timedelta(minutes=rules.window_minutes)
    if session.scalar(mine.where(Submission.submitted_at > since)) >= rules.per_window:
        raise Refusal(429, f"At most {rules.per_window} submissions every {rules.window_minutes} "
                           "minutes; try again later.",
                      f"Como máximo {rules.per_window} entregas cada {rules.window_minutes} "
                      "minutos; inténtalo más tarde.")
    submission = Submission(user=user, exercise=exercise, filename=filename[-255:], code=data,
                            sha256=hashlib.sha256(data).hexdigest(), submitted_at=now,
                            status=SubmissionStatus.queued.value, late_days=late_days,
                            penalty=penalty)
    session.add(submission)
    return submission


def reopen(submission: Submission) -> None:
    """Grade a finished submission again (a staff regrade, e.g. after fixing an exercise's checks):
    its runs so far stop counting toward the retry limit, and its last grade stands until the
    new one."""
    submission.retry_from = len(submission.runs)
    submission.status = SubmissionStatus.queued.value
    submission.enqueued_at = None
