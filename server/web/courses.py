"""Which course a page is in: `/courses/<slug>/…` names it, every view below it finds it in
`g.course` and the user's role there in `g.role`; the site's root lists a user's courses.

A user who is not in the course (nor an admin) gets 404 on every page of it: another course's
pages do not exist for them. An archived course is read-only: what changes it is refused."""

from __future__ import annotations

from flask import Blueprint, abort, current_app, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from sqlalchemy import select

from server.core.courses import courses_of, role_in
from server.core.models import STAFF_ROLES, Course, CourseRole, Exercise, Submission
from server.web.auth import db, log_in_first, login_required

blueprint = Blueprint("courses", __name__)
COURSE = "course"  # the URL value that names a course
ROLE_NAMES = {
    "student": _l("student"),
    "ta": _l("teaching assistant"),
    "instructor": _l("instructor"),
    "admin": _l("admin"),
}
READS = frozenset({"GET", "HEAD", "OPTIONS"})


@blueprint.app_url_value_preprocessor
def take_course(_endpoint: str | None, values: dict | None) -> None:
    g.course_slug = values.pop(COURSE, None) if values else None


@blueprint.app_url_defaults
def keep_course(endpoint: str, values: dict) -> None:
    """A link from a course's page to another of its pages names the same course."""
    # the URL's slug, which a refusal made before the course is loaded (a request too large)
    # has too
    if (
        COURSE not in values
        and g.get("course_slug") is not None
        and blueprint_needs_course(endpoint)
    ):
        values[COURSE] = g.course_slug


def blueprint_needs_course(endpoint: str) -> bool:
    try:
        return any(COURSE in rule.arguments for rule in current_app.url_map.iter_rules(endpoint))
    except KeyError:  # no such endpoint: url_for says so
        return False


def load_course():
    """After auth.load_user (app.py): the course the URL names, and the user's role in it."""
    g.course, g.role = None, None
    slug = g.get("course_slug")
    if slug is None:
        return None
    if g.user is None:  # before the course is looked up: which ones exist is no one's business
        return log_in_first()
    g.course = db().scalar(select(Course).where(Course.slug == slug))
    if g.course is None:
        abort(404)
    g.role = role_in(db(), g.user.id, g.course.id)
    if g.role is None:
        abort(404)
    if g.course.archived_at is not None and request.method not in READS:
        abort(403, _("This course is archived: it can be read, not changed."))
    return None


@blueprint.app_context_processor
def course_roles() -> dict:
    role = g.get("role")
    return {"staff": role in STAFF_ROLES, "instructor": role == CourseRole.instructor.value}


@blueprint.route("/")
@login_required
def home():
    """A user with one course lands in it (its staff on its course page); with several, or
    none, this page lists them."""
    mine = courses_of(db(), g.user)
    if len(mine) == 1 and not g.user.is_admin:
        course, role = mine[0]
        return redirect(landing(course, role))
    return render_template(
        "courses/home.html",
        role_names=ROLE_NAMES,
        courses=[(course, role, landing(course, role)) for course, role in mine],
    )


def landing(course: Course, role: str) -> str:
    """Where a user starts in a course: its staff on the course's page, a student on the
    exercises."""
    endpoint = "staff.overview" if role in STAFF_ROLES else "portal.index"
    return url_for(endpoint, course=course.slug)


# the pages' addresses before a service had courses, in bookmarks, mails and the terminal
# clients of older course venvs: each goes to its page in the course it is now in
@blueprint.route("/submissions/<int:submission_id>")
@login_required
def old_submission(submission_id: int):
    submission = db().get(Submission, submission_id)
    if submission is None:
        abort(404)
    course_id = submission.exercise.course_id
    if submission.user_id != g.user.id and role_in(db(), g.user.id, course_id) not in STAFF_ROLES:
        abort(404)
    # not 301: browsers keep those, and where it leads depends on who asks
    return redirect(
        url_for(
            "portal.submission", course=submission.exercise.course.slug, submission_id=submission_id
        )
    )


@blueprint.route("/exercises/<slug>")
@login_required
def old_exercise(slug: str):
    """The exercise in the user's one course that has it; the list of courses where several do."""
    mine = {course.id: course for course, _role in courses_of(db(), g.user)}
    found = (
        db()
        .scalars(
            select(Exercise).where(
                Exercise.slug == slug, Exercise.active, Exercise.course_id.in_(mine)
            )
        )
        .all()
    )
    if len(found) != 1:
        return redirect(url_for("courses.home")) if found else abort(404)
    return redirect(url_for("portal.exercise", course=mine[found[0].course_id].slug, slug=slug))
