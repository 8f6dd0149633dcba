"""A user's own account: its page (who they are, and its notices, password and tokens), setting
the password with the link a new account gets (no log-in
needed), changing it, listing and revoking their API tokens, the mail notices they get."""

from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import ngettext

from server.core.config import app_settings
from server.core.links import LinkExpired, LinkInvalid, fingerprint, read_token
from server.core.models import AuthSource, User, utcnow
from server.core.notices import Kind, choose, kinds_for, wants
from server.core.tokens import TokenError, issue, listed, revoke
from server.core.users import MIN_PASSWORD_LENGTH, set_password, set_password_once
from server.web.auth import db, login_required, start_session
from server.web.throttle import Throttled, check_password

blueprint = Blueprint("account", __name__, url_prefix="/account")
# what each notice tells, as its page says it
NOTICES = {
    Kind.score_set: _l("Staff set my grade on an exercise, or a submission's score, by hand"),
    Kind.exception: _l(
        "Staff grant me an exception or an accommodation (later deadlines, more attempts)"
    ),
    Kind.regrade: _l("An exercise is graded again and my grade changes"),
    Kind.graded: _l("A submission of mine is graded"),
    Kind.deadline: _l("A day before a deadline, if I have sent nothing to it yet"),
    Kind.grading_failed: _l(
        "The grader fails on submissions of a course I teach (one mail "
        "every few minutes at most, listing them)"
    ),
}


@blueprint.get("/")
@login_required
def home():
    """What "Account" opens: the mail notices, the password and the API tokens, each said in a
    line and reached from here."""
    return render_template(
        "auth/account.html",
        local_password=g.user.auth_source == AuthSource.local.value,
        tokens=len([token for token in listed(db(), g.user.id) if token.expires_at > utcnow()]),
        notices=[NOTICES[kind] for kind in kinds_for(db(), g.user) if wants(g.user, kind)],
    )


@blueprint.route("/set-password/<token>", methods=["GET", "POST"])
def set_password_by_link(token: str):
    """The page a set-password link opens: the new password twice, then its owner is logged in.
    A link works once (the password it sets spends it) and expires."""
    try:
        user_id, made_for = read_token(token)
    except LinkExpired:
        return _link_refused(
            410,
            _("This link has expired"),
            _(
                "A link to set your password works for a limited time: ask your instructor for a "
                "new one."
            ),
        )
    except LinkInvalid:
        user_id, made_for = None, None
    user = db().get(User, user_id) if user_id is not None else None
    if user is None:
        return _link_refused(
            404,
            _("This link is not valid"),
            _("Check that you copied all of it, or ask your instructor for a new one."),
        )
    if fingerprint(user) != made_for:
        return _link_used()
    if request.method == "GET":
        return _set_password_form(user)
    problem = _new_password_problem()
    if problem:
        flash(problem, "error")
        return _set_password_form(user, 400)
    if not set_password_once(db(), user, made_for, request.form["new"]):
        return _link_used()  # by another form sent with it meanwhile
    db().commit()
    db().refresh(user)
    start_session(user)
    flash(_("Your password is set: you are logged in."), "ok")
    return redirect(url_for("courses.home"), 303)


def _set_password_form(user: User, status: int = 200):
    return render_template("auth/set_password.html", user=user, minimum=MIN_PASSWORD_LENGTH), status


def _link_used():
    return _link_refused(
        410,
        _("This link was used already"),
        _(
            "Log in with the password you set with it; if you have lost it, ask your instructor for "
            "a new link."
        ),
    )


def _link_refused(status: int, title: str, explanation: str):
    return render_template("error.html", code=status, title=title, explanation=explanation), status


def _new_password_problem() -> str | None:
    """Why the form's new password (typed twice) cannot be set, or None."""
    new = request.form.get("new", "")
    if new != request.form.get("repeat", ""):
        return _("The new passwords differ.")
    if len(new) < MIN_PASSWORD_LENGTH:
        return _("The new password needs at least %(num)s characters.", num=MIN_PASSWORD_LENGTH)
    return None


@blueprint.route("/password", methods=["GET", "POST"])
@login_required
def password():
    if g.user.auth_source != AuthSource.local.value:  # never a second, local password
        flash(
            _(
                "You log in through the centre's directory or single sign-on: change your "
                "password there."
            ),
            "info",
        )
        return redirect(url_for("courses.home"), 303)
    if request.method == "GET":
        return render_template("auth/password.html", minimum=MIN_PASSWORD_LENGTH)
    problem = _new_password_problem()
    if problem:
        return _refused(problem)
    new = request.form["new"]
    try:  # throttled as a log-in: a borrowed session must not be a way to guess the password
        user = check_password(db(), g.user.username, request.form.get("current", ""))
    except Throttled as throttled:
        return _refused(throttled.message, 429, throttled.headers)
    if user is None:
        return _refused(_("The current password is wrong."))
    revoked = set_password(db(), user, new)
    db().commit()
    db().refresh(user)
    start_session(user)  # this browser stays logged in; every other session has ended
    flash(
        ngettext(
            "Password changed; your other sessions have ended and your API token was "
            "revoked: log in again with hpcgrade login where you used it.",
            "Password changed; your other sessions have ended and your %(num)s API "
            "tokens were revoked: log in again with hpcgrade login where you used them.",
            revoked,
        )
        if revoked
        else _("Password changed; your other sessions have ended."),
        "ok",
    )
    return redirect(url_for("courses.home"), 303)


def _refused(message: str, status: int = 400, headers: dict | None = None):
    flash(message, "error")
    return render_template("auth/password.html", minimum=MIN_PASSWORD_LENGTH), status, headers or {}


@blueprint.get("/tokens")
@login_required
def tokens():
    return render_template("auth/tokens.html", tokens=listed(db(), g.user.id), now=utcnow())


@blueprint.post("/tokens")
@login_required
def new_token():
    """A token made here, for those who have no password to give `hpcgrade login` (they log in
    through single sign-on): shown once, never stored in the page's cache."""
    try:
        token, _row = issue(
            db(), g.user, request.form.get("label", ""), app_settings().token_lifetime_days
        )
    except TokenError as exc:
        flash(str(exc), "error")
        return redirect(url_for("account.tokens"), 303)
    db().commit()
    server = app_settings().public_url or request.url_root.rstrip("/")
    page = render_template(
        "auth/tokens.html",
        tokens=listed(db(), g.user.id),
        now=utcnow(),
        new_token=token,
        server=server,
    )
    return page, 201, {"Cache-Control": "no-store"}


@blueprint.post("/tokens/<int:token_id>/revoke")
@login_required
def revoke_token(token_id: int):
    if not revoke(db(), token_id=token_id, user_id=g.user.id):
        abort(404)  # not one of yours
    db().commit()
    flash(_("Token revoked: it works no more."), "ok")
    return redirect(url_for("account.tokens"), 303)


@blueprint.route("/notices", methods=["GET", "POST"])
@login_required
def notices():
    """Which mail notices the user gets: each kind of theirs on or off."""
    kinds = kinds_for(db(), g.user)
    if request.method == "POST":
        choose(g.user, {kind: kind.value in request.form for kind in kinds})
        db().commit()
        flash(_("Your notice settings are saved."), "ok")
        return redirect(url_for("account.notices"), 303)
    return render_template(
        "auth/notices.html",
        notices=[(kind.value, NOTICES[kind], wants(g.user, kind)) for kind in kinds],
    )
