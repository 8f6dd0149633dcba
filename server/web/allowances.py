"""Per-student exceptions: an extension of an exercise's deadline or extra attempts for one
student (an allowance), a grade the staff set for the student on the exercise (SetGrade),
and the staff's adjustment of one submission's score (an override), kept beside the
automatic one. The rules that apply them are in grades.py (`terms`, `lateness`, `Grade`).

Teaching assistants grade by hand and grant exceptions as instructors do; a student, exercise
or submission of another course is not found (404)."""
from __future__ import annotations

import datetime as dt
import math
import re
import zoneinfo

from flask import (Blueprint, current_app, flash, g, redirect, render_template, request,
                   url_for)
from flask_babel import gettext as _
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from server.core.grades import (Terms, allowances_of, maximum_points, reassess_lateness,
                                student_grade, student_terms, terms)
from server.core.models import Allowance, Exercise, SetGrade, Submission, User, utcnow
from server.core.queue import send_notice
from server.web.auth import db, staff_required
from server.web.course import exercises
from server.web.i18n import points, time_zone, when
from server.web.portal import submission as submission_page
from server.web.staff import exercise_or_404, student_or_404, submission_or_404

blueprint = Blueprint("allowances", __name__, url_prefix="/courses/<course>/staff")
MAX_EXTRA_ATTEMPTS = 100
COMMENT_LIMIT = 2000
# what a datetime-local field sends (seconds when the browser adds them); a space for a browser
# that shows a plain text field instead
LOCAL_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?")


# --- the pages ----------------------------------------------------------------------------------

@blueprint.before_request
@staff_required
def only_staff() -> None:
    """Every page here is for the course's teaching assistants and instructors (and admins);
    a student gets 403."""


@blueprint.app_template_global()
def exceptions_of(student: User) -> list[tuple[Exercise, Terms]]:
    """For the staff's student page: each active exercise of the course with the student's
    terms there."""
    granted = allowances_of(db(), student.id)
    return [(exercise, terms(exercise, granted.get(exercise.id)))
            for exercise in exercises(db(), g.course.id)]


def _student_and_exercise(username: str, slug: str) -> tuple[User, Exercise]:
    return student_or_404(username), exercise_or_404(slug)


@blueprint.route("/students/<username>/exercises/<slug>", methods=["GET", "POST"])
def allowance(username: str, slug: str):
    """One student on one exercise: their submissions, and their exception (granted or changed
    with the form)."""
    student, exercise = _student_and_exercise(username, slug)
    if request.method == "POST":
        errors = _save(student, exercise)
        if not errors:
            _tell("exception", student_terms(db(), student.id, exercise).allowance.id)
            flash(_("The exception for %(name)s is saved.", name=student.name), "info")
            return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)
        for message in errors:
            flash(message, "error")
    return _allowance_page(student, exercise, 400 if request.method == "POST" else 200)


def _allowance_page(student: User, exercise: Exercise, status: int):
    granted = student_terms(db(), student.id, exercise)
    submissions = db().scalars(select(Submission).where(
        Submission.user_id == student.id, Submission.exercise_id == exercise.id)
        .order_by(Submission.id.desc())).all()
    row = granted.allowance
    granter = db().get(User, row.granted_by) if row is not None and row.granted_by else None
    return render_template(
        "staff/allowance.html", student=student, exercise=exercise, terms=granted,
        granter=granter, submissions=submissions, zone=time_zone(),
        grade=student_grade(db(), student.id, exercise.id),
        max_points=maximum_points(db(), [exercise])[exercise.id],
        form=request.form if request.method == "POST" else {
            "deadline": _local_input(row.deadline) if row and row.deadline else "",
            "extra_attempts": row.extra_attempts if row else 0,
            "comment": row.comment if row else ""}), status


def _save(student: User, exercise: Exercise) -> list[str]:
    """Grant or change the exception from the form, with the late penalties it changes, in one
    transaction; the reasons it is refused (then nothing changes). Two instructors granting one
    at once (or a double click) both find none: the database refuses the second row, and that
    grant is made again, as a change of the row the first one stored."""
    try:
        return _grant_and_commit(student, exercise)
    except IntegrityError:
        db().rollback()
        return _grant_and_commit(student, exercise)


def _grant_and_commit(student: User, exercise: Exercise) -> list[str]:
    errors = _grant(student, exercise, student_terms(db(), student.id, exercise).allowance)
    if not errors:
        reassess_lateness(db(), student.id, exercise)
        db().commit()
    return errors


def _grant(student: User, exercise: Exercise, found: Allowance | None) -> list[str]:
    """Grant or change the exception from the form (the caller commits); the reasons it is
    refused (then nothing changes)."""
    errors = []
    deadline = extra = None
    try:
        deadline = _new_deadline(exercise, found, request.form.get("deadline", "").strip())
    except ValueError as refusal:
        errors.append(str(refusal))
    try:
        extra = _extra_attempts(exercise, request.form.get("extra_attempts", "").strip())
    except ValueError as refusal:
        errors.append(str(refusal))
    comment = request.form.get("comment", "").strip()
    if len(comment) > COMMENT_LIMIT:
        errors.append(_("The comment is longer than %(num)s characters.", num=COMMENT_LIMIT))
    if not errors and deadline is None and not extra:
        errors.append(_("Give a later deadline, extra attempts or both."))
    if errors:
        return errors
    row = found or Allowance(user_id=student.id, exercise_id=exercise.id)
    row.deadline, row.extra_attempts, row.comment = deadline, extra, comment
    row.granted_by, row.granted_at = g.user.id, utcnow()
    db().add(row)
    return []


def _new_deadline(exercise: Exercise, found: Allowance | None, text: str) -> dt.datetime | None:
    if not text:
        return None
    if exercise.deadline is None:
        raise ValueError(_("This exercise has no deadline to extend."))
    moment = _parse_local(text)
    if found is not None and moment == found.deadline:
        return moment  # kept as it was, even once passed, while the attempts change
    if moment <= utcnow():
        raise ValueError(_("The new deadline (%(when)s) has already passed.", when=when(moment)))
    if moment <= exercise.deadline:
        raise ValueError(_("An extension must end after the exercise's deadline (%(when)s).",
                           when=when(exercise.deadline)))
    return moment


def _parse_local(text: str) -> dt.datetime:
    """A date and time as typed in the course's time zone, in UTC."""
    try:
        if not LOCAL_MOMENT.fullmatch(text):
            raise ValueError
        local = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(_("The new deadline must be a date and a time, such as %(example)s.",
                           example="2027-02-05 18:00")) from None
    zone = zoneinfo.ZoneInfo(time_zone())
    return local.replace(tzinfo=zone).astimezone(dt.timezone.utc)


def _local_input(moment: dt.datetime) -> str:
    """A stored moment as a datetime-local field shows it: in the course's time zone."""
    zone = zoneinfo.ZoneInfo(time_zone())
    return moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M")


def _extra_attempts(exercise: Exercise, text: str) -> int:
    try:
        extra = int(text or "0")
    except ValueError:
        extra = -1
    if not 0 <= extra <= MAX_EXTRA_ATTEMPTS:
        raise ValueError(_("Extra attempts must be a whole number from 0 to %(num)s.",
                           num=MAX_EXTRA_ATTEMPTS))
    if extra and exercise.max_attempts is None:
        raise ValueError(_("This exercise has no limit on attempts: extra attempts do not apply."))
    return extra


@blueprint.post("/students/<username>/exercises/<slug>/remove")
def remove_allowance(username: str, slug: str):
    student, exercise = _student_and_exercise(username, slug)
    # a statement, not the ORM's delete: a removal racing another one finds nothing to delete
    # instead of failing
    removed = db().execute(delete(Allowance).where(
        Allowance.user_id == student.id, Allowance.exercise_id == exercise.id)).rowcount
    if not removed:
        flash(_("%(name)s has no exception on this exercise.", name=student.name), "error")
    else:
        reassess_lateness(db(), student.id, exercise)
        db().commit()
        flash(_("The exception for %(name)s is removed.", name=student.name), "info")
    return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)


@blueprint.post("/students/<username>/exercises/<slug>/grade")
def set_grade(username: str, slug: str):
    """The student's grade on the exercise, whatever they submit, with the reason they read."""
    student, exercise = _student_and_exercise(username, slug)
    out_of = maximum_points(db(), [exercise])[exercise.id]
    errors = _scored_form_errors(out_of)
    if errors:
        for message in errors:
            flash(message, "error")
        return _allowance_page(student, exercise, 400)
    try:
        set_grade_id = _store_set_grade(student, exercise)
    except IntegrityError:  # another instructor set one at the same moment: this one replaces it
        db().rollback()
        set_grade_id = _store_set_grade(student, exercise)
    _tell("grade_set", set_grade_id)
    flash(_("The grade of %(name)s on this exercise is set by hand.", name=student.name), "info")
    return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)


def _tell(event: str, row_id: int) -> None:
    """The student is mailed what changed, by a worker, once it is committed."""
    send_notice(current_app.extensions["celery"], event, [row_id])


def _store_set_grade(student: User, exercise: Exercise) -> int:
    row = db().scalar(select(SetGrade).where(SetGrade.user_id == student.id,
                                             SetGrade.exercise_id == exercise.id)) \
        or SetGrade(user_id=student.id, exercise_id=exercise.id)
    row.score = _number(request.form["score"])
    row.comment = request.form["comment"].strip()
    row.set_by, row.set_at = g.user.id, utcnow()
    db().add(row)
    db().commit()
    return row.id


@blueprint.post("/students/<username>/exercises/<slug>/grade/remove")
def remove_set_grade(username: str, slug: str):
    student, exercise = _student_and_exercise(username, slug)
    removed = db().execute(delete(SetGrade).where(
        SetGrade.user_id == student.id, SetGrade.exercise_id == exercise.id)).rowcount
    if not removed:
        flash(_("%(name)s has no grade set by hand on this exercise.", name=student.name), "error")
    else:
        db().commit()
        flash(_("The grade of %(name)s on this exercise is their best submission's again.",
                name=student.name), "info")
    return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)


@blueprint.post("/submissions/<int:submission_id>/override")
def override(submission_id: int):
    """An instructor's score for a submission, with the reason the student reads."""
    submission = submission_or_404(submission_id)
    errors = _override_errors(submission)
    if errors:
        for message in errors:
            flash(message, "error")
        return submission_page(submission_id), 400  # again, with what was typed
    submission.override_score = _number(request.form["score"])
    submission.override_comment = request.form["comment"].strip()
    submission.override_by, submission.override_at = g.user.id, utcnow()
    db().commit()
    _tell("score_adjusted", submission.id)
    flash(_("The score of submission #%(id)s is adjusted by hand.", id=submission.id), "info")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)


def _override_errors(submission: Submission) -> list[str]:
    if submission.max_score is None:
        return [_("Only a graded submission can be given a score by hand.")]
    return _scored_form_errors(submission.max_score)


def _scored_form_errors(out_of: float | None) -> list[str]:
    """What is wrong with a form's score (from 0 to `out_of`) and its comment for the student."""
    errors = []
    score = _number(request.form.get("score", ""))
    if out_of is None:
        errors.append(_("This exercise's points are not known yet: grade a submission first."))
    elif score is None or not 0 <= score <= out_of:
        errors.append(_("The score must be a number from 0 to %(max)s.", max=points(out_of)))
    comment = request.form.get("comment", "").strip()
    if not comment:
        errors.append(_("Write a comment that says why: the student reads it."))
    elif len(comment) > COMMENT_LIMIT:
        errors.append(_("The comment is longer than %(num)s characters.", num=COMMENT_LIMIT))
    return errors


def _number(text: str) -> float | None:
    """A finite number, with a decimal point or (as Spanish writes it) a comma; None if not."""
    try:
        number = float(text.strip().replace(",", "."))
    except ValueError:
        return None
    return number if math.isfinite(number) else None


@blueprint.post("/submissions/<int:submission_id>/override/remove")
def remove_override(submission_id: int):
    submission = submission_or_404(submission_id)
    if submission.override_score is None:
        flash(_("This submission has no score set by hand."), "error")
    else:
        submission.override_score = submission.override_comment = None
        submission.override_by = submission.override_at = None
        db().commit()
        flash(_("Submission #%(id)s has its automatic score again.", id=submission.id), "info")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)
