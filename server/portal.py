"""The student pages: exercises, statements, uploading, history, live status and results."""
from __future__ import annotations

import uuid

import markdown
from flask import (Blueprint, abort, current_app, flash, g, jsonify, redirect, render_template,
                   request, session, url_for)
from markdown.extensions.tables import TableExtension
from sqlalchemy import select

from .catalogue import default_root
from .course import run_rows

from .auth import db, login_required
from .models import Exercise, Submission, utcnow
from .queue import enqueue
from .results import (WAITING, code_cells, exercise_rows, may_see, submission_dict,
                      submission_state, waiting)
from .submissions import PASTED, Refusal, Rules, idempotency_key, submit_once

blueprint = Blueprint("portal", __name__)
LANGS = ("en", "es")


def request_language() -> str:
    """The request's language: ?lang=, then the session's choice, then the browser's."""
    asked = request.args.get("lang")
    return asked if asked in LANGS else (
        session.get("lang") or request.accept_languages.best_match(LANGS) or "en")


@blueprint.before_app_request
def choose_language() -> None:
    """For every request, the API's too; a ?lang= is remembered for the next ones."""
    if request.args.get("lang") in LANGS:
        session["lang"] = request.args["lang"]
    g.lang = request_language()


@blueprint.app_context_processor
def language() -> dict:
    lang = g.get("lang", "en")
    return {"lang": lang, "other_lang": "es" if lang == "en" else "en",
            "t": lambda en, es: es if lang == "es" else en}


def _exercise(slug: str) -> Exercise:
    exercise = db().scalar(select(Exercise).where(Exercise.slug == slug, Exercise.active))
    if exercise is None:
        abort(404)
    return exercise


def _mine(submission_id: int) -> Submission:
    submission = db().get(Submission, submission_id)
    if submission is None or not may_see(submission.user_id, g.user.id, g.user.is_staff):
        abort(404)  # not 403: another student's submission does not exist for you
    return submission


@blueprint.route("/")
@login_required
def index():
    return render_template("portal/exercises.html", rows=exercise_rows(db(), g.user), now=utcnow())


@blueprint.route("/exercises/<slug>")
@login_required
def exercise(slug: str):
    return _exercise_page(_exercise(slug))


def _exercise_page(row: Exercise, pasted: str = "", status: int = 200):
    path = default_root() / row.slug / f"statement.{g.lang}.md"
    statement = markdown.markdown(path.read_text(), extensions=[
        "fenced_code", TableExtension(use_align_attribute=True)]) if path.exists() else ""
    submissions = db().scalars(select(Submission).where(
        Submission.user_id == g.user.id, Submission.exercise_id == row.id)
        .order_by(Submission.id.desc())).all()
    # each rendering of the form gets its own key: sending it twice stores one submission, and
    # no-store keeps the back button from showing an old form with a used key
    return render_template("portal/exercise.html", exercise=row, statement=statement,
                           submissions=submissions, now=utcnow(), pasted=pasted,
                           idempotency_key=uuid.uuid4().hex), status, {"Cache-Control": "no-store"}


@blueprint.post("/exercises/<slug>/submissions")
@login_required
def submit(slug: str):
    row = _exercise(slug)
    upload = request.files.get("file")
    # browsers send a textarea's line ends as CRLF
    pasted = request.form.get("code", "").replace("\r\n", "\n")
    try:
        filename, data = (upload.filename, upload.read()) if upload and upload.filename \
            else (PASTED, pasted.encode())
        submission, new = submit_once(db(), g.user, row, filename, data,
                                      Rules.from_config(current_app.config), utcnow(),
                                      idempotency_key(request.form.get("idempotency_key")))
    except Refusal as refusal:
        flash(refusal.message(g.lang), "error")
        return _exercise_page(row, pasted, refusal.status)  # what was pasted stays in the form
    if new or submission.enqueued_at is None:  # a replay of a request that failed before this
        enqueue(current_app.extensions["celery"], db(), [submission.id])
    return redirect(url_for("portal.submission", submission_id=submission.id), 303)


@blueprint.route("/submissions")
@login_required
def history():
    submissions = db().scalars(select(Submission).where(Submission.user_id == g.user.id)
                               .order_by(Submission.id.desc())).all()
    return render_template("portal/history.html", submissions=submissions)


@blueprint.route("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int):
    row = _mine(submission_id)
    return render_template("portal/submission.html", submission=row,
                           result=submission_dict(db(), submission_state(db(), row.id), g.lang),
                           waiting=row.status in WAITING, cells=code_cells(row),
                           runs=run_rows(row) if g.user.is_staff else [])


@blueprint.route("/submissions/<int:submission_id>/status")
@login_required
def status(submission_id: int):
    """What the submission page polls every second while it waits."""
    with current_app.extensions["hpcgrade.db"].reads() as reads:
        state = submission_state(reads, submission_id)
        if state is None or not may_see(state.user_id, g.user.id, g.user.is_staff):
            abort(404)
        return jsonify(status=state.status, **waiting(reads, state, g.lang),
                       score=state.score, max_score=state.max_score)
