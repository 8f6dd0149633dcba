"""Accepting a submission: every check happens before anything is stored, then one commit.

What is refused is refused with a message in both languages and an HTTP status; what is
accepted is committed as `queued` before anything is queued, so it is never lost.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from .models import Exercise, Submission, SubmissionStatus, User

EXTENSIONS = (".py", ".ipynb")
PASTED = "pasted.py"  # the name of code pasted into the page's form
# a submission whose grading staff stopped does not use up one of the student's attempts
COUNTS_AS_ATTEMPT = Submission.status != SubmissionStatus.cancelled.value
IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,128}")  # printable ASCII


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
        pasted = filename == PASTED
        raise Refusal(413, f"{'The pasted code' if pasted else 'The file'} is larger than "
                           f"{rules.max_upload_kb} KB.",
                      f"{'El código pegado' if pasted else 'El archivo'} supera los "
                      f"{rules.max_upload_kb} KB.")
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


def idempotency_key(value: str | None) -> str | None:
    """The key a client sends so that a retried request stores nothing twice; None if none."""
    if not value:
        return None
    if not IDEMPOTENCY_KEY.fullmatch(value):
        raise Refusal(400, "The idempotency key must be 1 to 128 printable ASCII characters.",
                      "La clave de idempotencia debe tener de 1 a 128 caracteres ASCII imprimibles.")
    return value


def submit_once(session: Session, user: User, exercise: Exercise | None, filename: str,
                data: bytes, rules: Rules, now: dt.datetime, key: str | None
                ) -> tuple[Submission, bool]:
    """Accept and commit a submission, once per idempotency key: a request sent again with its
    key gets the first submission back and uses no attempt. Returns (submission, whether new)."""
    user_id = user.id
    if key is not None and exercise is not None \
            and (earlier := _sent_before(session, user_id, key, exercise, data)) is not None:
        return earlier, False
    submission = accept(session, user, exercise, filename, data, rules, now)
    submission.idempotency_key = key
    try:
        session.commit()
    except IntegrityError:
        # the same key sent twice at once: the other request stored the submission first
        session.rollback()
        earlier = _sent_before(session, user_id, key, exercise, data) if key is not None else None
        if earlier is None:
            raise
        return earlier, False
    return submission, True


def _sent_before(session: Session, user_id: int, key: str, exercise: Exercise,
                 data: bytes) -> Submission | None:
    earlier = session.scalar(select(Submission).where(Submission.user_id == user_id,
                                                      Submission.idempotency_key == key))
    if earlier is not None and (earlier.exercise_id != exercise.id
                                or earlier.sha256 != hashlib.sha256(data).hexdigest()):
        raise Refusal(422, "This idempotency key was already used for another file or exercise; "
                           "send it with a new key (on the page: reload it).",
                      "Esta clave de idempotencia ya se usó con otro archivo u otro ejercicio; "
                      "envíalo con una clave nueva (en la página: recárgala).")
    return earlier


def reopen(submission: Submission) -> None:
    """Grade a finished submission again (a staff regrade, e.g. after fixing an exercise's checks):
    its runs so far stop counting toward the retry limit, and its last grade stands until the
    new one."""
    submission.retry_from = len(submission.runs)
    submission.status = SubmissionStatus.queued.value
    submission.enqueued_at = None
