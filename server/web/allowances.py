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

from babel.dates import get_month_names
from flask import current_app, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from server.core.grades import (
    Terms,
    maximum_points,
    reassess_lateness,
    setter_role,
    staff_role,
    student_grade,
    student_terms,
    terms_of,
)
from server.core.models import Allowance, Exercise, SetGrade, Submission, User, utcnow
from server.core.queue import send_notice
from server.web.auth import db
from server.web.course import exercises
from server.web.handgrading import after_adjusting, came_from_hand_grading, hand_grading_page
from server.web.i18n import LANGS, local_input, out_of, points, time_zone, when
from server.web.portal import submission as submission_page
from server.web.staff import exercise_or_404, student_or_404, submission_or_404
from server.web.staff_pages import staff_blueprint

blueprint = staff_blueprint("allowances", __name__)
MAX_EXTRA_ATTEMPTS = 100
COMMENT_LIMIT = 2000
# a new deadline as the pages write a moment ("5 Feb 2027, 18:00", "5 feb 2027, 18:00"), the
# zone's name after it if copied from the page; or in ISO ("2027-02-05 18:00")
PAGE_MOMENT = re.compile(r"(\d{1,2}) ([^\W\d_]+)\.? (\d{4}),? (\d{1,2}):(\d{2})(?: ([\w+-]+))?")
ISO_MOMENT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2})?")
# a month's name in either language, abbreviated ("sept", "Sep") or not: a Spanish reader may
# paste a date of the English page
MONTHS = {
    name.casefold().rstrip("."): number
    for lang in LANGS
    for width in ("abbreviated", "wide")
    for number, name in get_month_names(width, locale=lang).items()
} | {"sep": 9}
# how far after the exercise's deadline the form's example is
EXAMPLE_EXTENSION = dt.timedelta(days=7)


# --- the pages ----------------------------------------------------------------------------------


@blueprint.app_template_global()
def exceptions_of(student: User) -> list[tuple[Exercise, Terms]]:
    """For the staff's student page: each active exercise of the course with the student's
    terms there (their accommodation and exception included)."""
    active = exercises(db(), g.course.id)
    granted = terms_of(db(), student.id, active)
    return [(exercise, granted[exercise.id]) for exercise in active]


@blueprint.app_template_global()
def set_by_role(row: SetGrade) -> str | None:
    """Who set a grade, for the student's pages (grades.setter_role)."""
    return setter_role(db(), row)


@blueprint.app_template_global()
def adjusted_by_role(submission: Submission) -> str | None:
    """Who adjusted a submission's score, for the pages (grades.staff_role)."""
    return staff_role(db(), submission.override_by, submission.exercise_id)


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
            tell("exception", student_terms(db(), student.id, exercise).allowance.id)
            flash(_("The exception for %(name)s is saved.", name=student.name), "info")
            return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)
        for message in errors:
            flash(message, "error")
    return _allowance_page(student, exercise, 400 if request.method == "POST" else 200)


def _allowance_page(student: User, exercise: Exercise, status: int):
    granted = student_terms(db(), student.id, exercise)
    submissions = (
        db()
        .scalars(
            select(Submission)
            .where(Submission.user_id == student.id, Submission.exercise_id == exercise.id)
            .order_by(Submission.id.desc())
        )
        .all()
    )
    row = granted.allowance
    granter = db().get(User, row.granted_by) if row is not None and row.granted_by else None
    return render_template(
        "staff/allowance.html",
        student=student,
        exercise=exercise,
        terms=granted,
        granter=granter,
        submissions=submissions,
        zone=time_zone(),
        grade=student_grade(db(), student.id, exercise.id),
        max_points=maximum_points(db(), [exercise])[exercise.id],
        form=request.form
        if request.method == "POST"
        else {
            "deadline": local_input(row.deadline) if row else "",
            "extra_attempts": row.extra_attempts if row else 0,
            "comment": row.comment if row else "",
        },
    ), status


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
    deadline, extra, comment, errors = exception_form(exercise, found)
    if errors:
        return errors
    row = found or Allowance(user_id=student.id, exercise_id=exercise.id)
    row.deadline, row.extra_attempts, row.comment = deadline, extra, comment
    row.granted_by, row.granted_at = g.user.id, utcnow()
    db().add(row)
    return []


def exception_form(
    exercise: Exercise, found: Allowance | None
) -> tuple[dt.datetime | None, int, str, list[str]]:
    """The exception the form asks for (`found`: the student's, when it changes one): its
    deadline, extra attempts and comment, and the reasons to refuse it."""
    errors = []
    deadline = extra = None
    try:
        deadline = new_deadline(exercise, found, request.form.get("deadline", "").strip())
    except ValueError as refusal:
        errors.append(str(refusal))
    try:
        extra = extra_attempts(exercise, request.form.get("extra_attempts", "").strip())
    except ValueError as refusal:
        errors.append(str(refusal))
    comment = request.form.get("comment", "").strip()
    if len(comment) > COMMENT_LIMIT:
        errors.append(_("The comment is longer than %(num)s characters.", num=COMMENT_LIMIT))
    if not errors and deadline is None and not extra:
        errors.append(_("Give a later deadline, extra attempts or both."))
    return deadline, extra, comment, errors


def new_deadline(exercise: Exercise, found: Allowance | None, text: str) -> dt.datetime | None:
    if not text:
        return None
    if exercise.deadline is None:
        raise ValueError(_("This exercise has no deadline to extend."))
    moment = _parse_local(text, exercise)
    if found is not None and moment == found.deadline:
        return moment  # kept as it was, even once passed, while the attempts change
    if moment <= utcnow():
        raise ValueError(_("The new deadline (%(when)s) has already passed.", when=when(moment)))
    if moment <= exercise.deadline:
        raise ValueError(
            _(
                "An extension must end after the exercise's deadline (%(when)s).",
                when=when(exercise.deadline),
            )
        )
    return moment


def _parse_local(text: str, exercise: Exercise) -> dt.datetime:
    """A date and time typed in the course's time zone, as the pages write them (or in ISO), in
    UTC."""
    moment = _typed_moment(" ".join(text.split()), zoneinfo.ZoneInfo(time_zone()))
    if moment is None:
        raise ValueError(
            _(
                "The new deadline must be a date and a time as this page writes them, "
                "in %(zone)s time, such as %(example)s.",
                zone=time_zone(),
                example=when(exercise.deadline + EXAMPLE_EXTENSION),
            )
        )
    return moment.astimezone(dt.timezone.utc)


def _typed_moment(text: str, zone: zoneinfo.ZoneInfo) -> dt.datetime | None:
    """The moment in `zone`, or None where the text is no date and time of its own (a zone
    named after it must be that one's name then: "CET" in winter in Madrid)."""
    try:
        if ISO_MOMENT.fullmatch(text):
            return dt.datetime.fromisoformat(text).replace(tzinfo=zone)
        found = PAGE_MOMENT.fullmatch(text)
        if found is None or found[2].casefold() not in MONTHS:
            return None
        day, month, year, hour, minute, named = found.groups()
        moment = dt.datetime(
            int(year), MONTHS[month.casefold()], int(day), int(hour), int(minute), tzinfo=zone
        )
    except ValueError:  # a 31 February, a 25:00
        return None
    return moment if named in (None, moment.tzname()) else None


def extra_attempts(exercise: Exercise, text: str) -> int:
    try:
        extra = int(text or "0")
    except ValueError:
        extra = -1
    if not 0 <= extra <= MAX_EXTRA_ATTEMPTS:
        raise ValueError(
            _("Extra attempts must be a whole number from 0 to %(num)s.", num=MAX_EXTRA_ATTEMPTS)
        )
    if extra and exercise.max_attempts is None:
        raise ValueError(_("This exercise has no limit on attempts: extra attempts do not apply."))
    return extra


@blueprint.route("/students/<username>/exercises/<slug>/remove", methods=["GET", "POST"])
def remove_allowance(username: str, slug: str):
    """GET: the step that confirms it (what the student had, what applies again); POST: the
    exception removed, with the late penalties it changes."""
    student, exercise = _student_and_exercise(username, slug)
    back = url_for("allowances.allowance", username=username, slug=slug)
    if request.method == "GET":
        granted = student_terms(db(), student.id, exercise)
        if granted.allowance is None:
            return _nothing_to_remove(
                student,
                exercise,
                back,
                _("%(name)s has no exception on this exercise.", name=student.name),
            )
        return confirm_removal(
            student,
            exercise,
            back,
            _("Remove the exception?"),
            _("Remove the exception"),
            [
                (_("Deadline"), when(granted.deadline)),
                (_("Attempts"), "∞" if granted.max_attempts is None else str(granted.max_attempts)),
            ],
            _(
                "The exercise's deadline and attempts apply to %(name)s again, and the late "
                "penalty of the submissions already sent is worked out again.",
                name=student.name,
            ),
        )
    # a statement, not the ORM's delete: a removal racing another one finds nothing to delete
    # instead of failing
    removed = (
        db()
        .execute(
            delete(Allowance).where(
                Allowance.user_id == student.id, Allowance.exercise_id == exercise.id
            )
        )
        .rowcount
    )
    if not removed:
        flash(_("%(name)s has no exception on this exercise.", name=student.name), "error")
    else:
        reassess_lateness(db(), student.id, exercise)
        db().commit()
        flash(_("The exception for %(name)s is removed.", name=student.name), "info")
    return redirect(back, 303)


def confirm_removal(
    student: User,
    exercise: Exercise,
    back: str,
    heading: str,
    button: str,
    removed: list[tuple[str, str]],
    consequence: str,
):
    """A removal's confirmation: a page of its own, no script (the Content-Security-Policy
    allows none inline), its button sending the same address the POST that removes."""
    return render_template(
        "staff/confirm_removal.html",
        student=student,
        exercise=exercise,
        back=back,
        heading=heading,
        button=button,
        removed=removed,
        consequence=consequence,
    )


def _nothing_to_remove(student: User, exercise: Exercise, back: str, reason: str):
    """The confirmation's address when there is nothing to remove (removed meanwhile, or an old
    bookmark): said, with the way back."""
    return render_template(
        "staff/confirm_removal.html",
        student=student,
        exercise=exercise,
        back=back,
        heading=reason,
        removed=[],
    )


@blueprint.post("/students/<username>/exercises/<slug>/grade")
def set_grade(username: str, slug: str):
    """The student's grade on the exercise, whatever they submit, with the reason they read."""
    student, exercise = _student_and_exercise(username, slug)
    maximum = maximum_points(db(), [exercise])[exercise.id]
    errors = _scored_form_errors(maximum)
    if errors:
        for message in errors:
            flash(message, "error")
        return _allowance_page(student, exercise, 400)
    try:
        set_grade_id = _store_set_grade(student, exercise)
    except IntegrityError:  # another instructor set one at the same moment: this one replaces it
        db().rollback()
        set_grade_id = _store_set_grade(student, exercise)
    tell("grade_set", set_grade_id)
    flash(_("The grade of %(name)s on this exercise is set by hand.", name=student.name), "info")
    return redirect(url_for("allowances.allowance", username=username, slug=slug), 303)


def tell(event: str, row_id: int) -> None:
    """The student is mailed what changed, by a worker, once it is committed."""
    send_notice(current_app.extensions["celery"], event, [row_id])


def _store_set_grade(student: User, exercise: Exercise) -> int:
    row = db().scalar(
        select(SetGrade).where(SetGrade.user_id == student.id, SetGrade.exercise_id == exercise.id)
    ) or SetGrade(user_id=student.id, exercise_id=exercise.id)
    row.score = _number(request.form["score"])
    row.comment = request.form["comment"].strip()
    row.set_by, row.set_at = g.user.id, utcnow()
    db().add(row)
    db().commit()
    return row.id


@blueprint.route("/students/<username>/exercises/<slug>/grade/remove", methods=["GET", "POST"])
def remove_set_grade(username: str, slug: str):
    """GET: the step that confirms it; POST: the grade set by hand removed."""
    student, exercise = _student_and_exercise(username, slug)
    back = url_for("allowances.allowance", username=username, slug=slug)
    if request.method == "GET":
        grade = student_grade(db(), student.id, exercise.id)
        if not grade.set_by_hand:
            return _nothing_to_remove(
                student,
                exercise,
                back,
                _("%(name)s has no grade set by hand on this exercise.", name=student.name),
            )
        maximum = maximum_points(db(), [exercise])[exercise.id]
        return confirm_removal(
            student,
            exercise,
            back,
            _("Remove the grade set by hand?"),
            _("Remove it: the best submission counts again"),
            [(_("Grade set by hand"), out_of(grade.set_grade.score, maximum))],
            _(
                "The grade of %(name)s on this exercise is their best submission's again.",
                name=student.name,
            ),
        )
    removed = (
        db()
        .execute(
            delete(SetGrade).where(
                SetGrade.user_id == student.id, SetGrade.exercise_id == exercise.id
            )
        )
        .rowcount
    )
    if not removed:
        flash(_("%(name)s has no grade set by hand on this exercise.", name=student.name), "error")
    else:
        db().commit()
        flash(
            _(
                "The grade of %(name)s on this exercise is their best submission's again.",
                name=student.name,
            ),
            "info",
        )
    return redirect(back, 303)


@blueprint.post("/submissions/<int:submission_id>/override")
def override(submission_id: int):
    """An instructor's score for a submission, with the reason the student reads."""
    submission = submission_or_404(submission_id)
    errors = _override_errors(submission)
    if errors:
        for message in errors:
            flash(message, "error")
        again = hand_grading_page if came_from_hand_grading() else submission_page
        return again(submission_id), 400  # again, with what was typed
    submission.override_score = _number(request.form["score"])
    submission.override_comment = request.form["comment"].strip()
    submission.override_by, submission.override_at = g.user.id, utcnow()
    db().commit()
    tell("score_adjusted", submission.id)
    flash(_("The score of submission #%(id)s is adjusted by hand.", id=submission.id), "info")
    return redirect(
        after_adjusting(submission) or url_for("portal.submission", submission_id=submission_id),
        303,
    )


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


@blueprint.route("/submissions/<int:submission_id>/override/remove", methods=["GET", "POST"])
def remove_override(submission_id: int):
    """GET: the step that confirms it; POST: the submission's automatic score counts again."""
    submission = submission_or_404(submission_id)
    back = url_for("portal.submission", submission_id=submission_id)
    if submission.override_score is None:
        if request.method == "GET":
            return _nothing_to_remove(
                submission.user,
                submission.exercise,
                back,
                _("This submission has no score set by hand."),
            )
        flash(_("This submission has no score set by hand."), "error")
        return redirect(back, 303)
    if request.method == "GET":
        return confirm_removal(
            submission.user,
            submission.exercise,
            back,
            _("Go back to the automatic score of submission #%(id)s?", id=submission.id),
            _("Go back to the automatic score"),
            [
                (
                    _("Score adjusted by the instructors"),
                    out_of(submission.override_score, submission.max_score),
                ),
                (_("Automatic score"), out_of(submission.score, submission.max_score)),
            ],
            _("The student's grade is worked out again with the automatic score."),
        )
    submission.override_score = submission.override_comment = None
    submission.override_by = submission.override_at = None
    db().commit()
    flash(_("Submission #%(id)s has its automatic score again.", id=submission.id), "info")
    return redirect(back, 303)
