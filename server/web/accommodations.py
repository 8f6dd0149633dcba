"""Exceptions for more than one exercise or more than one student at a time: a student's
accommodation (extra days on every deadline of the course, a factor on every limit of attempts),
and the same exception on one exercise for several students at once. The rule that applies them
is grades.terms; the per-exercise exception of one student is allowances.py.

For the course's teaching assistants and instructors, as every exception is, except that an
accommodation is its instructors' to give unless the course lets its teaching assistants
(`Course.tas_grant_accommodations`); a student of another course is not found (404), and a bulk
action naming one is refused whole."""

from __future__ import annotations

import math
import re

from flask import abort, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError

from server.core.grades import (
    MAX_ATTEMPTS_FACTOR,
    MAX_EXTRA_DAYS,
    accommodation_of,
    reassess_lateness,
)
from server.core.models import Accommodation, Allowance, CourseRole, Exercise, User, utcnow
from server.web.allowances import COMMENT_LIMIT, exception_form, tell
from server.web.auth import db
from server.web.course import exercises, students
from server.web.i18n import time_zone
from server.web.staff import exercise_or_404, student_or_404
from server.web.staff_pages import staff_blueprint

blueprint = staff_blueprint("accommodations", __name__)
# usernames pasted as a list: one a line, or separated by commas, semicolons or spaces
SEPARATORS = re.compile(r"[\s,;]+")


@blueprint.app_template_global()
def accommodation_for(student: User) -> Accommodation | None:
    """For the staff's student page: the student's accommodation in the course, if any."""
    return accommodation_of(db(), student.id, g.course.id)


@blueprint.app_template_global()
def gives_accommodations() -> bool:
    """Whether the user may give, change or remove the course's accommodations: its
    instructors, and its teaching assistants where the course lets them."""
    return g.role == CourseRole.instructor.value or (
        g.role == CourseRole.ta.value and g.course.tas_grant_accommodations
    )


def _accommodations_allowed() -> None:
    if not gives_accommodations():
        abort(
            403,
            _(
                "Accommodations are given by the course's instructors: this course does not "
                "let its teaching assistants give them."
            ),
        )


# --- one student's accommodation, on every exercise -------------------------------------------


@blueprint.route("/students/<username>/accommodation", methods=["GET", "POST"])
def accommodation(username: str):
    _accommodations_allowed()
    student = student_or_404(username)
    found = accommodation_of(db(), student.id, g.course.id)
    if request.method == "POST":
        errors = _save_accommodation(student, found)
        if not errors:
            flash(_("The accommodation for %(name)s is saved.", name=student.name), "info")
            return redirect(url_for("staff.student", username=username), 303)
        for message in errors:
            flash(message, "error")
    granter = db().get(User, found.granted_by) if found is not None and found.granted_by else None
    return render_template(
        "staff/allowance_accommodation.html",
        student=student,
        found=found,
        granter=granter,
        max_days=MAX_EXTRA_DAYS,
        max_factor=MAX_ATTEMPTS_FACTOR,
        form=request.form
        if request.method == "POST"
        else {
            "extra_days": found.extra_days if found else 0,
            "attempts_factor": f"{found.attempts_factor:g}" if found else "1",
            "comment": found.comment if found else "",
        },
    ), 400 if request.method == "POST" else 200


def _save_accommodation(student: User, found: Accommodation | None) -> list[str]:
    """Store the form's accommodation and work out again the late penalty of every submission
    of the student in the course, in one transaction; the reasons it is refused (then nothing
    changes). Two saves at once both find none: the second is made again as a change."""
    errors = []
    days = _whole_number(request.form.get("extra_days", ""), MAX_EXTRA_DAYS)
    if days is None:
        errors.append(_("Extra days must be a whole number from 0 to %(num)s.", num=MAX_EXTRA_DAYS))
    factor = _factor(request.form.get("attempts_factor", ""))
    if factor is None:
        errors.append(
            _(
                "The attempts factor must be a number from 1 to %(num)s, such as 1.5.",
                num=MAX_ATTEMPTS_FACTOR,
            )
        )
    comment = request.form.get("comment", "").strip()
    if len(comment) > COMMENT_LIMIT:
        errors.append(_("The comment is longer than %(num)s characters.", num=COMMENT_LIMIT))
    if not errors and days == 0 and factor == 1:
        errors.append(_("Give extra days, an attempts factor above 1 or both."))
    if errors:
        return errors
    try:
        _store_accommodation(student, found, days, factor, comment)
    except IntegrityError:
        db().rollback()
        _store_accommodation(
            student, accommodation_of(db(), student.id, g.course.id), days, factor, comment
        )
    return []


def _store_accommodation(
    student: User, found: Accommodation | None, days: int, factor: float, comment: str
) -> None:
    row = found or Accommodation(user_id=student.id, course_id=g.course.id)
    row.extra_days, row.attempts_factor, row.comment = days, factor, comment
    row.granted_by, row.granted_at = g.user.id, utcnow()
    db().add(row)
    db().flush()
    _reassess_course(student)
    db().commit()
    tell("accommodation", row.id)


def _reassess_course(student: User) -> None:
    """Every deadline of the student's moved: the late penalty of each submission to the
    course's exercises (inactive ones too) is worked out again."""
    for exercise in db().scalars(
        select(Exercise).where(Exercise.course_id == g.course.id, Exercise.deadline.is_not(None))
    ):
        reassess_lateness(db(), student.id, exercise)


def _whole_number(text: str, most: int) -> int | None:
    try:
        number = int(text.strip() or "0")
    except ValueError:
        return None
    return number if 0 <= number <= most else None


def _factor(text: str) -> float | None:
    """A factor from 1 to MAX_ATTEMPTS_FACTOR, written with a point or a comma (1,5 in Spanish)."""
    try:
        factor = float(text.strip().replace(",", ".") or "1")
    except ValueError:
        return None
    return factor if math.isfinite(factor) and 1 <= factor <= MAX_ATTEMPTS_FACTOR else None


@blueprint.route("/students/<username>/accommodation/remove", methods=["GET", "POST"])
def remove_accommodation(username: str):
    """GET: the step that confirms it; POST: the accommodation removed, with the late penalties
    it changes."""
    _accommodations_allowed()
    student = student_or_404(username)
    back = url_for("staff.student", username=username)
    found = accommodation_of(db(), student.id, g.course.id)
    if request.method == "GET":
        return render_template(
            "staff/confirm_removal.html",
            student=student,
            back=back,
            heading=_("Remove the accommodation?")
            if found
            else _("%(name)s has no accommodation in this course.", name=student.name),
            button=_("Remove the accommodation") if found else None,
            removed=[
                (_("Extra days on every deadline"), str(found.extra_days)),
                (_("Attempts factor"), f"× {found.attempts_factor:g}"),
            ]
            if found
            else [],
            consequence=_(
                "The exercises' deadlines and attempts apply to %(name)s again "
                "(with their exceptions on single exercises), and the late penalty of "
                "the submissions already sent is worked out again.",
                name=student.name,
            ),
        )
    removed = (
        db()
        .execute(
            delete(Accommodation).where(
                Accommodation.user_id == student.id, Accommodation.course_id == g.course.id
            )
        )
        .rowcount
    )
    if removed:
        _reassess_course(student)
        db().commit()
        flash(_("The accommodation for %(name)s is removed.", name=student.name), "info")
    else:
        flash(_("%(name)s has no accommodation in this course.", name=student.name), "error")
    return redirect(back, 303)


# --- the same exception for several students ---------------------------------------------------


@blueprint.route("/exceptions", methods=["GET", "POST"])
def bulk_exceptions():
    """One exercise, several students (usernames pasted, or ticked), the same later deadline
    and/or extra attempts for each: stored for all of them or, refused, for none."""
    active = exercises(db(), g.course.id)
    everyone = students(db(), g.course.id)
    if request.method == "POST":
        errors, granted = _grant_to_all(everyone)
        if not errors:
            for row_id in granted:
                tell("exception", row_id)
            flash(
                ngettext(
                    "The exception is saved for %(num)s student.",
                    "The exception is saved for %(num)s students.",
                    len(granted),
                ),
                "info",
            )
            return redirect(
                url_for("accommodations.bulk_exceptions", exercise=request.form["exercise"]), 303
            )
        for message in errors:
            flash(message, "error")
    form = request.form if request.method == "POST" else request.args
    chosen = _chosen_exercise(active, form.get("exercise", ""))
    return render_template(
        "staff/allowances_bulk.html",
        exercises=active,
        students=everyone,
        chosen=chosen,
        ticked=set(form.getlist("student")),
        zone=time_zone(),
        form=form,
    ), 400 if request.method == "POST" else 200


def _chosen_exercise(active: list[Exercise], slug: str) -> Exercise | None:
    return next((exercise for exercise in active if exercise.slug == slug), None)


def _grant_to_all(everyone: list[User]) -> tuple[list[str], list[int]]:
    """(the reasons it is refused, the ids of the exceptions stored): all or nothing."""
    exercise = exercise_or_404(request.form.get("exercise", ""))
    by_username = {student.username: student for student in everyone}
    named = list(
        dict.fromkeys(
            [name for name in SEPARATORS.split(request.form.get("usernames", "")) if name]
            + request.form.getlist("student")
        )
    )
    unknown = [name for name in named if name not in by_username]
    errors = []
    if unknown:
        errors.append(
            ngettext(
                "%(names)s is not a student of this course: nothing was saved.",
                "%(names)s are not students of this course: nothing was saved.",
                len(unknown),
                names=", ".join(unknown),
            )
        )
    elif not named:
        errors.append(_("Choose the students: paste their usernames or tick them."))
    deadline, extra, comment, refused = exception_form(exercise, None)
    errors += refused
    if errors:
        return errors, []
    chosen = [by_username[name] for name in named]
    try:
        return [], _store_all(exercise, chosen, deadline, extra, comment)
    except IntegrityError:  # another grant at the same moment: made again, as changes
        db().rollback()
        return [], _store_all(exercise, chosen, deadline, extra, comment)


def _store_all(
    exercise: Exercise, chosen: list[User], deadline, extra: int, comment: str
) -> list[int]:
    """Each student's exception on the exercise, new or changed: what the form gives replaces
    theirs (a deadline, extra attempts, a comment), what it leaves empty stays as it was; with
    the late penalties it changes, in one transaction."""
    found = {
        row.user_id: row
        for row in db().scalars(
            select(Allowance).where(
                Allowance.exercise_id == exercise.id,
                Allowance.user_id.in_([student.id for student in chosen]),
            )
        )
    }
    rows = []
    for student in chosen:
        row = found.get(student.id) or Allowance(
            user_id=student.id, exercise_id=exercise.id, extra_attempts=0, comment=""
        )
        if deadline is not None:
            row.deadline = deadline
        if extra:
            row.extra_attempts = extra
        if comment:
            row.comment = comment
        row.granted_by, row.granted_at = g.user.id, utcnow()
        db().add(row)
        rows.append(row)
    db().flush()
    for student in chosen:
        reassess_lateness(db(), student.id, exercise)
    db().commit()
    return [row.id for row in rows]
