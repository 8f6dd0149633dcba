"""Logging in and out with a session cookie; who the current user is; role checks."""
from __future__ import annotations

import functools

from flask import (Blueprint, abort, current_app, flash, g, redirect, render_template, request,
                   session, url_for)
from sqlalchemy.orm import Session

from .models import User
from .users import authenticate

blueprint = Blueprint("auth", __name__)


def db() -> Session:
    """The request's database session (closed when the request ends)."""
    if "db_session" not in g:
        g.db_session = current_app.extensions["hpcgrade.db"].sessions()
    return g.db_session


@blueprint.before_app_request
def load_user() -> None:
    user_id = session.get("user_id")
    g.user = db().get(User, user_id) if user_id is not None else None


def login_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        if g.user is None:
            return redirect(url_for("auth.login", next=request.full_path))
        return view(*args, **kwargs)
    return wrapped


def staff_required(view):
    @functools.wraps(view)
    @login_required
    def wrapped(*args, **kwargs):
        if not g.user.is_staff:
            abort(403)
        return view(*args, **kwargs)
    return wrapped


def _safe_next(target: str | None) -> str:
    # only paths on this site, never "//evil.example" or "https://…"
    if target and target.startswith("/") and not target.startswith("//"):
        return target
    return url_for("portal.index")


@blueprint.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "POST":
        user = authenticate(db(), request.form.get("username", ""), request.form.get("password", ""))
        if user is not None:
            session.clear()
            session["user_id"] = user.id
            return redirect(_safe_next(request.args.get("next")))
        flash("Wrong username or password.", "error")
        return render_template("auth/login.html"), 401
    return render_template("auth/login.html")


@blueprint.post("/logout")
def logout():
    session.clear()
    return redirect(url_for("auth.login"))

