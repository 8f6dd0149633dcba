"""Logging in and out with a session cookie; who the current user is; role checks.

A session cookie carries the user's session version: log-out and a new password raise it, which
ends every session of the user at once, a copied cookie included."""

from __future__ import annotations

import functools
import logging
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_babel import gettext as _
from sqlalchemy.orm import Session

from server.core.directory import DirectoryError
from server.core.ldap_directory import DirectoryUnavailable
from server.core.models import STAFF_ROLES, CourseRole, User
from server.core.users import end_sessions
from server.web.throttle import Throttled, check_password

blueprint = Blueprint("auth", __name__)
log = logging.getLogger(__name__)


def db() -> Session:
    """The request's database session (closed when the request ends)."""
    if "db_session" not in g:
        g.db_session = current_app.extensions["hpcgrade.db"].sessions()
    return g.db_session


def load_user() -> None:
    """Who the request is from (the app runs it first: app.py)."""
    user_id = session.get("user_id")
    g.user = db().get(User, user_id) if user_id is not None else None
    if g.user is not None and session.get("version") != g.user.session_version:
        clear_session()  # logged out (or the password changed) since this cookie was made
        g.user = None


def clear_session() -> None:
    """Forget who this browser is (its CSRF token too), but not the language it chose: the
    choice made on the log-in page outlives logging in, and logging out."""
    lang = session.get("lang")
    session.clear()
    if lang is not None:
        session["lang"] = lang


def start_session(user: User) -> None:
    clear_session()
    session.update(user_id=user.id, version=user.session_version)
    session.permanent = True  # it ends SESSION_LIFETIME_HOURS after its last request


def log_in_first():
    """To the log-in page, which comes back here; a form sent after its session ended comes
    back to the page it was sent from (not to its address, which takes no GET), that page's
    script putting back what it held."""
    if request.method == "POST":
        return session_ended()
    return redirect(
        url_for("auth.login", next=request.full_path if request.query_string else request.path)
    )


def session_ended():
    """A form sent after its session ended (logged out elsewhere, a new password, the cookie
    gone): to the log-in page with a word, and back to the form's page after it."""
    flash(_("Your session ended: log in and send it again."), "error")
    back = page_sent_from()
    return redirect(url_for("auth.login", next=kept_page(back) if back else None), 303)


# the query parameter that asks a page to put back what its form held when it was sent
KEPT = "kept"


def kept_page(path: str) -> str:
    """`path` with KEPT added to its query."""
    return f"{path}{'&' if '?' in path else '?'}{KEPT}=1" if KEPT + "=" not in path else path


def page_sent_from() -> str | None:
    """The page of this site that sent the request (its path and query), to go back to."""
    referrer = urlsplit(request.referrer or "")
    if (
        referrer.netloc != request.host
        or not referrer.path.startswith("/")
        or referrer.path.startswith("//")
    ):
        return None
    return referrer.path + (f"?{referrer.query}" if referrer.query else "")


def login_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        if g.user is None:
            return log_in_first()
        return view(*args, **kwargs)

    wrapped.needs_login = True  # a form it takes, sent with no session, had one that ended
    return wrapped


def needs_login() -> bool:
    """Whether the request's view is one only a logged-in user reaches."""
    view = current_app.view_functions.get(request.endpoint or "")
    return getattr(view, "needs_login", False)


def staff_required(view):
    """The course's teaching assistants and instructors (and admins); a student gets 403."""

    @functools.wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if g.get("role") not in STAFF_ROLES:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def instructor_required(view):
    """The course's instructors (and admins): what changes exercises, grades of everyone or
    settings; a teaching assistant gets 403."""

    @functools.wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if g.get("role") != CourseRole.instructor.value:
            abort(403)
        return view(*args, **kwargs)

    return wrapped


def safe_next(target: str | None) -> str:
    """A path on this site, or the user's courses: never another site, however it is spelled."""
    # as browsers do: control characters and spaces around it go, tabs and newlines inside
    # it too, and a backslash is a slash ("/\t/evil.example" and "/\\evil.example" are
    # "//evil.example")
    cleaned = (target or "").strip("".join(map(chr, range(33))))
    cleaned = cleaned.translate({9: None, 10: None, 13: None}).replace("\\", "/")
    parts = urlsplit(cleaned)
    if (
        cleaned.startswith("/")
        and not cleaned.startswith("//")
        and not parts.scheme
        and not parts.netloc
        and cleaned.isprintable()
    ):
        return cleaned
    return url_for("courses.home")


@blueprint.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        return render_template("auth/login.html")
    # a refused log-in keeps the username typed: only the password is typed again
    username = request.form.get("username", "")
    try:
        user = check_password(db(), username, request.form.get("password", ""))
    except Throttled as throttled:
        flash(throttled.message, "error")
        return render_template("auth/login.html", username=username), 429, throttled.headers
    except DirectoryUnavailable as away:  # ours to fix, not the user's password
        log.error("log-in through the directory failed: %s", away)
        flash(
            _(
                "The centre's directory cannot be reached just now, so your password cannot "
                "be checked; try again in a few minutes."
            ),
            "error",
        )
        return render_template("auth/login.html", username=username), 503
    except DirectoryError as refused:
        log.warning("a directory log-in refused: %s", refused)
        flash(
            _(
                "Your directory account cannot log in here: %(reason)s. Ask an admin.",
                reason=str(refused),
            ),
            "error",
        )
        return render_template("auth/login.html", username=username), 403
    if user is None:
        flash(_("Wrong username or password."), "error")
        return render_template("auth/login.html", username=username), 401
    start_session(user)
    return redirect(safe_next(request.args.get("next")))


@blueprint.post("/logout")
def logout():
    if g.user is not None:  # every session of the user ends, not only this browser's
        end_sessions(db(), g.user.id)
        db().commit()
    clear_session()
    return redirect(url_for("auth.login"))
