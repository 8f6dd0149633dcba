"""The JSON API under /api/v1/, with bearer tokens for scripts and `hpcgrade submit`."""
from __future__ import annotations

import functools
import hashlib
import secrets

from flask import Blueprint, current_app, g, jsonify, request, url_for
from sqlalchemy import select

from . import csrf
from .auth import db
from .models import ApiToken, Exercise, Submission, utcnow
from .queue import enqueue
from .results import exercise_rows, submission_dict
from .submissions import Refusal, Rules, accept
from .users import authenticate

blueprint = Blueprint("api", __name__, url_prefix="/api/v1")
csrf.exempt(blueprint)  # bearer tokens, not cookies: nothing for a forged form to ride on


def error(status: int, message: str):
    return jsonify(error=message), status


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_required(view):
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        row = db().scalar(select(ApiToken).where(ApiToken.token_hash == _digest(token))) \
            if scheme == "Bearer" and token else None
        if row is None:
            return error(401, "missing or invalid token: send 'Authorization: Bearer <token>'")
        row.last_used_at = utcnow()
        db().commit()
        g.api_user = row.user
        return view(*args, **kwargs)
    return wrapped


@blueprint.post("/tokens")
def create_token():
    body = request.get_json(silent=True) or request.form
    user = authenticate(db(), str(body.get("username", "")), str(body.get("password", "")))
    if user is None:
        return error(401, "wrong username or password")
    token = secrets.token_urlsafe(32)
    db().add(ApiToken(user=user, token_hash=_digest(token)))
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
        for r in exercise_rows(db(), g.api_user)])


@blueprint.post("/submissions")
@token_required
def create_submission():
    upload = request.files.get("file")
    if upload is None or not request.form.get("exercise"):
        return error(400, "send multipart fields 'exercise' and 'file'")
    session = db()
    exercise = session.scalar(select(Exercise).where(Exercise.slug == request.form["exercise"]))
    try:
        submission = accept(session, g.api_user, exercise, upload.filename or "", upload.read(),
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
    submission = db().get(Submission, submission_id)
    if submission is None or (submission.user_id != g.api_user.id and not g.api_user.is_staff):
        return error(404, "no such submission")
    return jsonify(submission_dict(db(), submission, g.lang))
