"""The JSON API under /api/v1/, with bearer tokens for scripts and `hpcgrade submit`."""
from __future__ import annotations

import datetime as dt
import functools
import hashlib
import secrets
import time
from dataclasses import dataclass

from flask import Blueprint, abort, current_app, g, jsonify, request, url_for
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from .app import csrf
from .auth import db
from .models import ApiToken, Exercise, User, utcnow
from .queue import enqueue
from .results import exercise_rows, may_see, submission_state
from .submissions import Refusal, Rules, accept
from .users import authenticate

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")
TOKEN_CHECK_SECONDS = 60.0
KNOWN_TOKENS = 10_000
csrf.exempt(blueprint)  # bearer tokens, not cookies: nothing for a forged form to ride on


def error(status: int, message: str):
    return jsonify(error=message), status


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Bearer:
    """Whom a token belongs to, as last read from the database."""

    user_id: int
    is_staff: bool
    checked: float  # time.monotonic()


def _bearer(token: str) -> Bearer | None:
    # a status poll a second from each waiting student must not cost a token query and a write
    # every time: each process re-reads a token (and records its use) once a minute
    known_tokens = current_app.extensions["hpcgrade.tokens"]
    digest = _digest(token)
    known = known_tokens.get(digest)
    if known is not None and time.monotonic() - known.checked < TOKEN_CHECK_SECONDS:
        return known
    row = db().scalar(select(ApiToken).options(joinedload(ApiToken.user))
                      .where(ApiToken.token_hash == digest))
    if row is None:
        known_tokens.pop(digest, None)
        return None
    row.last_used_at = utcnow()
    db().commit()
    if len(known_tokens) >= KNOWN_TOKENS:
        known_tokens.clear()
    known = known_tokens[digest] = Bearer(row.user_id, row.user.is_staff, time.monotonic())
    return known


def token_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        g.bearer = _bearer(token) if scheme == "Bearer" and token else None
        if g.bearer is None:
            return error(401, "missing or invalid token: send 'Authorization: Bearer <token>'")
        return view(*args, **kwargs)
    return wrapped


def _api_user() -> User:
    user = db().get(User, g.bearer.user_id)
    if user is None:  # deleted since its token was last read
        abort(401, "the account of this token no longer exists")
    return user


@blueprint.post("/tokens")
def create_token():
    body = request.get_json(silent=True) or request.form
    user = authenticate(db(), str(body.get("username", "")), str(body.get("password", "")))
    if user is None:
        return error(401, "wrong username or password")
    token = secrets.token_urlsafe(32)
    db().add(ApiToken(user=user, token_hash=_digest(token), expires_at=utcnow() + dt.timedelta(days=120)))
    db().commit()
    return jsonify(token=token, username=user.username), 201


@blueprint.get("/exercises")
@token_required
def exercises():
    return jsonify(exercises=[{
        "slug": r["exercise"].slug, "title": {"en": r["exercise"].title_en, "es": r["exercise"].title_es},
        "deadline": r["exercise"].deadline.isoformat() if r["exercise"].deadline else None,
        "deadline_policy": r["exercise"].deadline_policy, "best_score": r["best"],
        "attempts_used": r["attempts_used"], "attempts_left": r["attempts_left"]}
        for r in exercise_rows(db(), _api_user())])


@blueprint.post("/submissions")
@token_required
def create_submission():
    upload = request.files.get("file")
    if upload is None or not request.form.get("exercise"):
        return error(400, "send multipart fields 'exercise' and 'file'")
    session = db()
    exercise = session.scalar(select(Exercise).where(Exercise.slug == request.form["exercise"]))
    try:
        submission = accept(session, _api_user(), exercise, upload.filename or "", upload.read(),
                            Rules.from_config(current_app.config), utcnow())
    except Refusal as refusal:
        return error(refusal.status, refusal.message(g.lang))
    session.commit()
    enqueue(current_app.extensions["celery"], session, [submission.id])
    url = url_for("api.get_submission", submission_id=submission.id, _external=True)
    return jsonify(id=submission.id, url=url, status=submission.status), 202, {"Location": url}


@blueprint.get("/submissions/<int:submission_id>")
@token_required
def get_submission(submission_id: int):
    with current_app.extensions["hpcgrade.db"].reads() as reads:
        state = submission_state(reads, submission_id)
        if state is None or not may_see(state.user_id, g.bearer.user_id, g.bearer.is_staff):
            return error(404, "no such submission")
        body = current_app.extensions["hpcgrade.results"].get_or_build(reads, state, g.lang)
    return current_app.response_class(body, mimetype="application/json")
