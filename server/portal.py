"""The student pages: exercises, statements, uploading, history, live status and results."""
from __future__ import annotations

import markdown
from flask import (Blueprint, abort, current_app, flash, g, jsonify, redirect, render_template,
                   request, session, url_for)
from sqlalchemy import select

from .catalogue import default_root
from .course import run_rows

from .auth import db, login_required
from .models import Exercise, Submission, utcnow
from .queue import enqueue
from .results import (WAITING, code_cells, exercise_rows, may_see, queue_position,
                      submission_dict, submission_state)
from .submissions import Refusal, Rules, accept

blueprint = Blueprint("portal", __name__)
LANGS = ("en", "es")


@blueprint.before_app_request
def choose_language() -> None:
    """For every request, the API's too: ?lang=, then the session's choice, then the browser's."""
    if request.args.get("lang") in LANGS:
        session["lang"] = request.args["lang"]
    g.lang = session.get("lang") or request.accept_languages.best_match(LANGS) or "en"


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
    row = _exercise(slug)
    path = default_root() / slug / f"statement.{g.lang}.md"
    statement = markdown.markdown(path.read_text(), extensions=["fenced_code", "tables"]) \
        if path.exists() else ""
    submissions = db().scalars(select(Submission).where(
        Submission.user_id == g.user.id, Submission.exercise_id == row.id)
        .order_by(Submission.id.desc())).all()
    return render_template("portal/exercise.html", exercise=row, statement=statement,
                           submissions=submissions, now=utcnow())


@blueprint.post("/exercises/<slug>/submissions")
@login_required
def submit(slug: str):
    row = _exercise(slug)
    try:
        upload = request.files.get("file")
        if upload and upload.filename:
            filename, data = upload.filename, upload.read()
        else:
            filename, data = "pasted.py", request.form.get("code", "").encode()
        submission = accept(db(), g.user, row, filename, data,
                            Rules.from_config(current_app.config), utcnow())
    except Refusal as refusal:
        flash(refusal.message(g.lang), "error")
        return redirect(url_for("portal.exercise", slug=slug)), 303
    db().commit()
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
        return jsonify(status=state.status, queue_position=queue_position(reads, state),
                       score=state.score, max_score=state.max_score)
