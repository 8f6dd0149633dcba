"""A user's own account: changing the password, listing and revoking their API tokens."""
from __future__ import annotations

from flask import Blueprint, abort, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _, ngettext

from .auth import db, login_required, start_session
from .models import utcnow
from .throttle import Throttled, check_password
from .tokens import listed, revoke
from .users import MIN_PASSWORD_LENGTH, set_password

blueprint = Blueprint("account", __name__, url_prefix="/account")


@blueprint.route("/password", methods=["GET", "POST"])
@login_required
def password():
    if request.method == "GET":
        return render_template("auth/password.html", minimum=MIN_PASSWORD_LENGTH)
    new = request.form.get("new", "")
    if new != request.form.get("repeat", ""):
        return _refused(_("The new passwords differ."))
    if len(new) < MIN_PASSWORD_LENGTH:
        return _refused(_("The new password needs at least %(num)s characters.",
                          num=MIN_PASSWORD_LENGTH))
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
    flash(ngettext("Password changed; your other sessions have ended and your API token was "
                   "revoked: log in again with hpcgrade login where you used it.",
                   "Password changed; your other sessions have ended and your %(num)s API "
                   "tokens were revoked: log in again with hpcgrade login where you used them.",
                   revoked) if revoked else _("Password changed; your other sessions have ended."),
          "ok")
    return redirect(url_for("portal.index"), 303)


def _refused(message: str, status: int = 400, headers: dict | None = None):
    flash(message, "error")
    return render_template("auth/password.html", minimum=MIN_PASSWORD_LENGTH), status, headers or {}


@blueprint.get("/tokens")
@login_required
def tokens():
    return render_template("auth/tokens.html", tokens=listed(db(), g.user.id), now=utcnow())


@blueprint.post("/tokens/<int:token_id>/revoke")
@login_required
def revoke_token(token_id: int):
    if not revoke(db(), token_id=token_id, user_id=g.user.id):
        abort(404)  # not one of yours
    db().commit()
    flash(_("Token revoked: it works no more."), "ok")
    return redirect(url_for("account.tokens"), 303)
