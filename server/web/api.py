"""The JSON API under /api/v1/, with bearer tokens for scripts and `hpcgrade submit`, or a MUNGE
credential of the cluster per request (server/core/munge.py)."""

from __future__ import annotations

import datetime as dt
import functools
import logging
from dataclasses import dataclass
from typing import NoReturn

from flask import Blueprint, abort, current_app, g, jsonify, request, url_for
from flask_babel import gettext as _
from sqlalchemy import select, update
from sqlalchemy.orm import Session
from werkzeug.datastructures import WWWAuthenticate
from werkzeug.exceptions import Unauthorized

from server.core.catalogue import CHECK_FILES, current_info, download_names
from server.core.config import app_settings
from server.core.courses import courses_of, exercise_folder, role_in
from server.core.directory import DirectoryError
from server.core.grades import Grade, setter_role
from server.core.ldap_directory import DirectoryUnavailable
from server.core.models import ApiToken, Course, Exercise, User, utcnow
from server.core.munge import MungeRefused, MungeUnavailable, binding, vouched_user
from server.core.queue import enqueue
from server.core.tokens import TokenError, clean_label, digest, issue
from server.web.auth import db
from server.web.csrf import csrf
from server.web.results import exercise_rows, may_see, submission_state
from server.web.submissions import Refusal, Rules, idempotency_key, submit_once, upload_name
from server.web.throttle import Throttled, check_password

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")
TOKEN_USE_RECORDED_EVERY = dt.timedelta(minutes=1)
log = logging.getLogger(__name__)
csrf.exempt(blueprint)  # bearer tokens, not cookies: nothing for a forged form to ride on


def error(status: int, message: str):
    return jsonify(error=message), status


@dataclass(frozen=True)
class Bearer:
    """Whom a token belongs to, as the database says in this request."""

    user_id: int
    is_admin: bool


def _refuse(message: str) -> NoReturn:
    """401, naming the schemes this service takes: a client with no token tells by it whether
    a MUNGE credential could have served."""
    schemes = ["Bearer", *(["MUNGE"] if app_settings().munge_login else [])]
    raise Unauthorized(message, www_authenticate=[WWWAuthenticate(name) for name in schemes])


def _bearer(reads: Session, token: str) -> Bearer:
    # read afresh on every request, token and user in one indexed query, so that a revoked or
    # expired token and a changed role apply at once; the status poll (each waiting student,
    # every second) stays a read: the token's use is written down at most once a minute
    found = (
        reads.connection()
        .execute(
            select(ApiToken.id, ApiToken.expires_at, ApiToken.last_used_at, User.id, User.is_admin)
            .join(ApiToken.user)
            .where(ApiToken.token_hash == digest(token))
        )
        .first()
        if token
        else None
    )
    if found is None:
        _refuse(_("missing or invalid token: send 'Authorization: Bearer <token>'"))
    token_id, expires_at, last_used_at, user_id, is_admin = found
    now = utcnow()
    if expires_at <= now:
        _refuse(_("token expired, run hpcgrade login again"))
    if last_used_at is None or now - last_used_at >= TOKEN_USE_RECORDED_EVERY:
        db().execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=now))
        db().commit()
    return Bearer(user_id, is_admin)


def _munge_bearer(credential: str) -> Bearer:
    """Whom the cluster vouches for, by a MUNGE credential made for this very request."""
    settings = app_settings()
    if not settings.munge_login:
        _refuse(_("this service takes no MUNGE credentials: run hpcgrade login"))
    path = request.script_root + request.path
    if request.query_string:
        path += f"?{request.query_string.decode()}"
    # the body read once, kept for the view's form parsing
    expected = binding(request.method, path, request.get_data(cache=True))
    try:
        user = vouched_user(db(), settings, credential, expected)
    except MungeRefused as refused:
        _refuse(_("MUNGE credential refused: %(reason)s", reason=str(refused)))
    except MungeUnavailable as away:
        log.error("MUNGE credentials cannot be checked: %s\n%s", away, away.output)
        abort(
            503,
            _(
                "the service cannot check MUNGE credentials just now: try again later, "
                "or log in with hpcgrade login"
            ),
        )
    return Bearer(user.id, user.is_admin)


def token_required(view):
    """The view runs with g.bearer and g.reads, a session for one-statement reads (the token's
    own: one connection from the pool for the status poll, not two)."""

    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        scheme, _space, token = request.headers.get("Authorization", "").partition(" ")
        with current_app.extensions["hpcgrade.db"].reads() as g.reads:
            g.bearer = (
                _munge_bearer(token)
                if scheme == "MUNGE"
                else _bearer(g.reads, token if scheme == "Bearer" else "")
            )
            return view(*args, **kwargs)

    return wrapped


def _api_user() -> User:
    user = db().get(User, g.bearer.user_id)
    if user is None:  # deleted after this request read its token
        _refuse(_("the account of this token no longer exists"))
    return user


@blueprint.post("/tokens")
def create_token():
    body = request.get_json(silent=True) if request.is_json else request.form
    username, password = (
        (body.get(k) for k in ("username", "password")) if isinstance(body, dict) else (None, None)
    )
    if not isinstance(username, str) or not isinstance(password, str):
        return error(400, _("send a JSON object with the strings 'username' and 'password'"))
    try:
        label = clean_label(body.get("label", ""))
        user = check_password(db(), username, password)
    except TokenError as exc:
        return error(400, str(exc))
    except Throttled as throttled:
        return jsonify(error=throttled.message), 429, throttled.headers
    except DirectoryUnavailable as away:  # ours to fix, not the user's password
        log.error("log-in through the directory failed: %s", away)
        return error(
            503, _("the centre's directory cannot be reached just now: try again in a few minutes")
        )
    except DirectoryError as refused:
        return error(
            403,
            _(
                "this directory account cannot log in here: %(reason)s; ask an admin",
                reason=str(refused),
            ),
        )
    if user is None:
        return error(401, _("wrong username or password"))
    token, row = issue(db(), user, label, app_settings().token_lifetime_days)
    db().commit()
    return jsonify(
        token=token, username=user.username, expires_at=row.expires_at.isoformat(timespec="seconds")
    ), 201


@blueprint.get("/courses")
@token_required
def courses():
    """The user's courses and their role in each."""
    return jsonify(
        courses=[_course_dict(course, role) for course, role in courses_of(db(), _api_user())]
    )


def _course_dict(course: Course, role: str) -> dict:
    return {
        "slug": course.slug,
        "title": {"en": course.title_en, "es": course.title_es},
        "edition": course.edition,
        "role": role,
        "archived": course.archived_at is not None,
    }


@blueprint.get("/exercises")
@token_required
def exercises():
    """The exercises of the user's courses (of `?course=` alone), each with the user's grade."""
    user = _api_user()
    mine = _courses_asked(user, request.args.get("course") or None)
    return jsonify(
        exercises=[
            {
                "course": course.slug,
                "slug": r["exercise"].slug,
                "title": {"en": r["exercise"].title_en, "es": r["exercise"].title_es},
                "deadline": r["deadline"].isoformat() if r["deadline"] else None,
                "deadline_policy": r["exercise"].deadline_policy,
                "best_score": r["grade"].score,
                "grade": _grade_dict(r["grade"]),
                "attempts_used": r["attempts_used"],
                "attempts_left": r["attempts_left"],
            }
            for course, _role in mine
            for r in exercise_rows(db(), user, course.id)
        ]
    )


def _courses_asked(user: User, slug: str | None) -> list[tuple[Course, str]]:
    """The user's courses, or the one `slug` names; 404 naming theirs when it is not one."""
    mine = courses_of(db(), user)
    if slug is None:
        return mine
    found = [(course, role) for course, role in mine if course.slug == slug]
    if not found:
        abort(
            404,
            _(
                "you are not in a course %(course)s; yours: %(courses)s",
                course=slug,
                courses=_named(mine),
            ),
        )
    return found


def _named(courses: list[tuple[Course, str]]) -> str:
    return ", ".join(course.slug for course, _role in courses) or _("none")


def _exercise(user: User, reference: str, course_slug: str | None) -> Exercise:
    """The active exercise `reference` names (EXERCISE, or COURSE/EXERCISE) among the user's
    courses, or in `course_slug`; 404 when none has it, 409 naming them when several do."""
    if "/" in reference:
        named, reference = reference.split("/", 1)
        if course_slug not in (None, named):
            abort(
                400,
                _(
                    "%(course)s/%(exercise)s names another course than %(other)s: name one",
                    course=named,
                    exercise=reference,
                    other=course_slug,
                ),
            )
        course_slug = named
    mine = _courses_asked(user, course_slug)
    found = (
        db()
        .scalars(
            select(Exercise).where(
                Exercise.slug == reference,
                Exercise.active,
                Exercise.course_id.in_([course.id for course, _role in mine]),
            )
        )
        .all()
    )
    if not found:
        abort(
            404,
            _(
                "no exercise %(exercise)s in your courses (%(courses)s)",
                exercise=reference,
                courses=_named(mine),
            ),
        )
    still_open = [exercise for exercise in found if exercise.course.archived_at is None]
    if still_open:  # an archived edition's exercise does not stand in the way of the open one
        found = still_open
    if len(found) > 1:
        abort(
            409,
            _(
                "exercise %(exercise)s is in several of your courses: name one, as "
                "COURSE/%(exercise)s (%(courses)s)",
                exercise=reference,
                courses=", ".join(sorted(exercise.course.slug for exercise in found)),
            ),
        )
    return found[0]


def _grade_dict(grade: Grade) -> dict:
    """The grade and why: the submission it comes from, or the grade the staff set (`by`: the
    setter's role in the course, "ta" or "instructor"; None once they left it)."""
    set_grade = grade.set_grade
    return {
        "score": grade.score,
        "submission_id": grade.submission_id,
        # the key's name is older than teaching assistants setting grades: `by` says whose role
        "set_by_instructor": None
        if set_grade is None
        else {
            "comment": set_grade.comment,
            "at": set_grade.set_at.isoformat(),
            "by": setter_role(db(), set_grade),
        },
    }


@blueprint.get("/exercises/<slug>/files")
@token_required
def exercise_files(slug: str):
    """What students may have of an exercise (starter, visible checks, support code, the known
    wrong programs' failures of the visible checks), the names the portal downloads them as, and
    its limits: `hpcgrade check` runs the visible checks with them, on the student's machine;
    `hpcgrade starter` writes them for a student to start from."""
    exercise = _exercise(_api_user(), slug, request.args.get("course") or None)
    info = current_info(exercise_folder(exercise))
    if info is None:
        return error(404, _("no such exercise"))
    return jsonify(
        course=exercise.course.slug,
        exercise=exercise.slug,
        limits=info.limits,
        names=download_names(exercise.slug),
        files={
            name: (info.path / name).read_text()
            for name in CHECK_FILES
            if (info.path / name).is_file()
        },
    )


@blueprint.post("/submissions")
@token_required
def create_submission():
    upload = request.files.get("file")
    if upload is None or not request.form.get("exercise"):
        return error(400, _("send multipart fields 'exercise' and 'file'"))
    session = db()
    user = _api_user()
    exercise = _exercise(user, request.form["exercise"], request.form.get("course") or None)
    rules = Rules.from_settings(app_settings())
    try:
        # one byte over the limit is enough to refuse a file (a request may be 32 times larger)
        submission, new = submit_once(
            session,
            user,
            exercise,
            upload_name(upload.filename or ""),
            upload.read((rules.max_upload_kb << 10) + 1),
            rules,
            utcnow(),
            idempotency_key(request.headers.get("Idempotency-Key")),
        )
    except Refusal as refusal:
        return error(refusal.status, refusal.message)
    if new or submission.enqueued_at is None:  # a replay of a request that failed before this
        enqueue(current_app.extensions["celery"], session, [submission.id])
    url = url_for("api.get_submission", submission_id=submission.id, _external=True)
    page = url_for(
        "portal.submission",
        course=exercise.course.slug,
        submission_id=submission.id,
        _external=True,
    )
    # a retry with the key of a stored submission gets the same answer, said to be a replay
    return (
        jsonify(
            id=submission.id,
            url=url,
            status=submission.status,
            course=exercise.course.slug,
            page=page,
        ),
        202,
        {"Location": url, "Idempotent-Replayed": "false" if new else "true"},
    )


@blueprint.get("/submissions/<int:submission_id>")
@token_required
def get_submission(submission_id: int):
    state = submission_state(g.reads, submission_id)
    if (
        state is None
        or state.user_id != g.bearer.user_id
        and not may_see(
            state.user_id, g.bearer.user_id, role_in(g.reads, g.bearer.user_id, state.course_id)
        )
    ):
        return error(404, _("no such submission"))
    body = current_app.extensions["hpcgrade.results"].get_or_build(g.reads, state, g.lang)
    return current_app.response_class(body, mimetype="application/json")
