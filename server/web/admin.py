"""The admin's pages of courses, /admin/courses: every course with its people and exercises;
one created, edited, copied into a new edition (its settings, staff and exercises; no student,
no submission) and archived or opened again: what `hpcgrade courses …` does.

Admins only (an account's global `is_admin`): an instructor of every course is not one. Every
value is checked by server/core/courses.py; a wrong one is shown in the form and nothing is
stored, the exercises synced with the course included."""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import ngettext
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from server.core.catalogue import ExerciseConfigError
from server.core.config import SLURM_KEYS
from server.core.course_admin import counts, slurm_text, slurm_with, sync_course
from server.core.courses import (
    SETTINGS,
    CourseError,
    archive_course,
    copy_course,
    create_course,
    edit_course,
    find_course,
)
from server.core.models import Course
from server.web.auth import db, login_required

blueprint = Blueprint("admin", __name__, url_prefix="/admin/courses")
# the form's fields of settings that are text as typed (the Slurm table is one field a key);
# `directory_groups`, a table of roles, is set by `hpcgrade courses edit --groups` and left as
# it is here: a form without it once erased it on every save
TEXT_SETTINGS = tuple(key for key in SETTINGS if key not in ("slurm", "directory_groups"))
# the late policies (catalogue.DEADLINE_POLICIES), in the reader's words
POLICIES = {
    "none": _l("none: late work counts in full"),
    "penalty": _l("penalty: late work loses the penalty per started day"),
    "refuse": _l("refuse: late work is not accepted"),
}


@blueprint.before_request
@login_required
def only_admins() -> None:
    if not g.user.is_admin:
        abort(403)


@blueprint.get("/")
def courses():
    """Every course, the open ones first, with its students, staff and exercises."""
    listed = (
        db().scalars(select(Course).order_by(Course.archived_at.is_not(None), Course.slug)).all()
    )
    return render_template("admin/courses.html", courses=listed, counts=counts(db()))


@blueprint.route("/new", methods=["GET", "POST"])
def create():
    if request.method == "GET":
        return _form("create", {"deadline_policy": "none", "penalty_per_day": "0"})
    form = _posted()
    return _saved(form, "create", lambda: create_course(db(), form["slug"], **_values(form)))


@blueprint.route("/<slug>/edit", methods=["GET", "POST"])
def edit(slug: str):
    course = _course(slug)
    if course.archived_at is not None:
        abort(403, _("This course is archived: it can be read, not changed."))
    if request.method == "GET":
        return _form("edit", _shown(course), course)
    form = {**_posted(), "slug": course.slug}
    return _saved(form, "edit", lambda: edit_course(db(), course, **_values(form)), course)


@blueprint.route("/<slug>/copy", methods=["GET", "POST"])
def copy(slug: str):
    """A new edition of the course: its settings (as the form changes them), staff and
    exercises."""
    course = _course(slug)
    if request.method == "GET":
        return _form("copy", {**_shown(course), "slug": "", "edition": ""}, course)
    form = _posted()
    if not form["edition"]:
        return _refused(form, "copy", _("give the new edition"), course)
    return _saved(
        form, "copy", lambda: copy_course(db(), course, form["slug"], **_values(form)), course
    )


@blueprint.post("/<slug>/archive")
def archive(slug: str):
    archive_course(_course(slug))
    db().commit()
    flash(
        _(
            "Course %(slug)s is archived: its staff and students still read it; nobody can "
            "submit or change anything in it.",
            slug=slug,
        ),
        "ok",
    )
    return redirect(url_for(".courses"), 303)


@blueprint.post("/<slug>/unarchive")
def unarchive(slug: str):
    archive_course(_course(slug), archived=False)
    db().commit()
    flash(_("Course %(slug)s is open again.", slug=slug), "ok")
    return redirect(url_for(".courses"), 303)


def _course(slug: str) -> Course:
    try:
        return find_course(db(), slug)
    except CourseError:
        abort(404)


def _posted() -> dict[str, str]:
    fields = ("slug", *TEXT_SETTINGS, *(f"slurm_{key}" for key in SLURM_KEYS))
    return {field: request.form.get(field, "").strip() for field in fields}


def _values(form: dict[str, str]) -> dict:
    """The course's settings the form holds, to be checked: no Spanish title is the English
    one, the Slurm fields left empty are the service's SLURM_* settings."""
    values = {key: form[key] for key in TEXT_SETTINGS}
    values["title_es"] = values["title_es"] or values["title_en"]
    values["penalty_per_day"] = values["penalty_per_day"] or "0"
    values["slurm"] = slurm_with({}, {key: form[f"slurm_{key}"] for key in SLURM_KEYS})
    return values


def _shown(course: Course) -> dict[str, str]:
    """The course's settings as the form shows them: its own, empty where it takes the
    service's."""
    shown = {
        key: "" if getattr(course, key) is None else str(getattr(course, key))
        for key in TEXT_SETTINGS
    }
    shown["tas_grant_accommodations"] = "yes" if course.tas_grant_accommodations else ""
    slurm = slurm_text(course.slurm or {})
    return {
        "slug": course.slug,
        **shown,
        **{f"slurm_{key}": slurm.get(key, "") for key in SLURM_KEYS},
    }


def _saved(form: dict, action: str, save, course: Course | None = None):
    """`save()` and the course's exercises synced, committed together; or the form again with
    what is wrong, nothing stored."""
    try:
        saved = save()
        number, _changes = sync_course(db(), saved)
        db().commit()
    except (CourseError, ExerciseConfigError) as exc:
        return _refused(form, action, str(exc), course)
    except IntegrityError:  # the same slug, created by someone else since the check
        return _refused(
            form, action, _("course %(slug)s already exists", slug=form["slug"]), course
        )
    flash(
        ngettext(
            "Course %(slug)s saved, with %(num)s exercise in step with its folder.",
            "Course %(slug)s saved, with %(num)s exercises in step with their folder.",
            number,
            slug=saved.slug,
        ),
        "ok",
    )
    return redirect(url_for(".courses"), 303)


def _refused(form: dict, action: str, problem: str, course: Course | None):
    db().rollback()
    return _form(action, form, course, _("Not saved: %(problem)s.", problem=problem), 400)


def _form(
    action: str,
    form: dict,
    course: Course | None = None,
    problem: str | None = None,
    status: int = 200,
):
    return render_template(
        "admin/course_form.html",
        action=action,
        form=form,
        course=course,
        problem=problem,
        slurm_keys=SLURM_KEYS,
        policies=POLICIES,
    ), status
