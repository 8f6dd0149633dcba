"""The student pages: exercises, statements, uploading, history, live status and results."""

from __future__ import annotations

import uuid

import markdown
from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    send_file,
    session,
    url_for,
)
from flask_babel import gettext as _
from markdown.extensions.tables import TableExtension
from sqlalchemy import select
from sqlalchemy.orm import defer

from server.core.catalogue import PUBLIC_FILES, download_names
from server.core.config import app_settings
from server.core.courses import exercise_folder, role_in
from server.core.grades import maximum_points, student_grade
from server.core.models import STAFF_ROLES, CourseRole, Exercise, Submission, utcnow
from server.core.queue import enqueue
from server.web import live
from server.web.auth import KEPT, db, kept_page, login_required
from server.web.course import run_rows
from server.web.i18n import LANGS, request_language, when
from server.web.results import (
    WAITING,
    exercise_rows,
    may_see,
    page_view,
    submission_dict,
    submission_state,
    waiting,
)
from server.web.submissions import (
    PASTED,
    Refusal,
    Rules,
    form_work,
    idempotency_key,
    submit_once,
)

blueprint = Blueprint("portal", __name__, url_prefix="/courses/<course>")


def choose_language() -> None:
    """For every request, the API's too, once its user is known (app.py); a ?lang= is
    remembered for the next ones."""
    if request.args.get("lang") in LANGS:
        session["lang"] = request.args["lang"]
    g.lang = request_language()
    chosen = session.get("lang")
    if g.get("user") is not None and chosen and g.user.language != chosen:
        # the language chosen on a page (the log-in page's too) is the one mail reaches them in
        g.user.language = chosen
        db().commit()


@blueprint.app_context_processor
def language() -> dict:
    lang = g.get("lang", "en")
    return {"lang": lang, "other_lang": "es" if lang == "en" else "en"}


def active_exercise(slug: str) -> Exercise:
    """The course's exercise of this slug that students see; 404 for any other."""
    exercise = db().scalar(
        select(Exercise).where(
            Exercise.course_id == g.course.id, Exercise.slug == slug, Exercise.active
        )
    )
    if exercise is None:
        abort(404)
    return exercise


def _mine(submission_id: int) -> Submission:
    submission = db().get(Submission, submission_id)
    if (
        submission is None
        or submission.exercise.course_id != g.course.id
        or not may_see(submission.user_id, g.user.id, g.role)
    ):
        abort(404)  # not 403: another student's submission does not exist for you
    return submission


def _rows() -> list[dict]:
    """exercise_rows (the student's own deadline and attempts), each with its maximum points."""
    rows = exercise_rows(db(), g.user, g.course.id)
    maxima = maximum_points(db(), [row["exercise"] for row in rows])
    for row in rows:
        row["max_points"] = maxima[row["exercise"].id]
    return rows


def _closed_because(row: dict, now) -> str | None:
    """Why this student can submit no more to the exercise, said before they try; the same
    rules as submissions.accept, which still refuses a form sent from an older page."""
    exercise = row["exercise"]
    if (
        exercise.deadline_policy == "refuse"
        and row["deadline"] is not None
        and now > row["deadline"]
    ):
        return _(
            "The deadline for this exercise passed (%(when)s); late work is not accepted.",
            when=when(row["deadline"]),
        )
    if row["attempts_left"] == 0:  # worded as submissions.accept words it
        return (
            _("You have used your only attempt for this exercise.")
            if row["max_attempts"] == 1
            else _("You have used all %(num)s attempts for this exercise.", num=row["max_attempts"])
        )
    return None


@blueprint.route("/")
@login_required
def index():
    return render_template("portal/exercises.html", rows=_rows(), now=utcnow())


@blueprint.route("/exercises/<slug>")
@login_required
def exercise(slug: str):
    exercise = active_exercise(slug)
    path = exercise_folder(exercise) / f"statement.{g.lang}.md"
    statement = (
        _focusable_code(
            markdown.markdown(
                _without_title(path.read_text()),
                extensions=["fenced_code", TableExtension(use_align_attribute=True)],
            )
        )
        if path.exists()
        else ""
    )
    submissions = (
        db()
        .scalars(
            select(Submission)
            .where(Submission.user_id == g.user.id, Submission.exercise_id == exercise.id)
            .order_by(Submission.id.desc())
        )
        .all()
    )
    row = next(r for r in _rows() if r["exercise"].id == exercise.id)
    now = utcnow()
    files = [name for name in PUBLIC_FILES if (exercise_folder(exercise) / name).is_file()]
    # each rendering of the form gets its own key: sending it twice stores one submission, and
    # no-store keeps the back button from showing an old form with a used key
    return (
        render_template(
            "portal/exercise.html",
            exercise=exercise,
            row=row,
            statement=statement,
            title=exercise.title_es if g.lang == "es" else exercise.title_en,
            files=files,
            download_names=download_names(exercise.slug),
            submissions=submissions,
            now=now,
            closed=_closed_because(row, now),
            # back after a send that did not go through: the page's script puts back what the
            # form held (static/exercise.js), and the message is said beside the form
            kept=request.args.get(KEPT) is not None,
            idempotency_key=uuid.uuid4().hex,
        ),
        {"Cache-Control": "no-store"},
    )


def _without_title(statement: str) -> str:
    """The statement without its `# Title` line: the page puts the title first, above the
    exercise's points, attempts and deadline."""
    first, _newline, rest = statement.partition("\n")
    return rest if first.startswith("# ") else statement


def _focusable_code(html: str) -> str:
    """The statement's code blocks scroll sideways on a phone: each takes the keyboard's focus
    (tabindex), so that the arrow keys scroll it, and is a named region for screen readers.
    Markdown escapes a "<pre>" written inside code, so only its own blocks match."""
    return html.replace("<pre>", f'<pre tabindex="0" role="region" aria-label="{_("Code")}">')


@blueprint.route("/exercises/<slug>/files/<name>")
@login_required
def download(slug: str, name: str):
    """The starter file, the visible checks and the public support file, as downloads; nothing
    else of the folder."""
    if name not in PUBLIC_FILES:
        abort(404)
    exercise = active_exercise(slug)
    path = exercise_folder(exercise) / name
    if not path.is_file():
        abort(404)
    return send_file(
        path,
        mimetype="text/x-python",
        as_attachment=True,
        download_name=download_names(exercise.slug).get(name, name),
    )


@blueprint.post("/exercises/<slug>/submissions")
@login_required
def submit(slug: str):
    exercise = active_exercise(slug)
    upload, pasted = request.files.get("file"), request.form.get("code", "")
    rules = Rules.from_settings(app_settings())
    try:
        filename, data = form_work(upload, pasted, rules)
        submission, new = submit_once(
            db(),
            g.user,
            exercise,
            filename,
            data,
            rules,
            utcnow(),
            idempotency_key(request.form.get("idempotency_key")),
        )
    except Refusal as refusal:
        # to the page, not a page at the form's address (reloading it would send it again): the
        # page's script puts the pasted code back
        flash(refusal.message, "error")
        return redirect(kept_page(url_for("portal.exercise", slug=slug)), 303)
    if filename != PASTED and pasted.strip():
        flash(
            _("The file %(name)s was graded; the pasted code was not.", name=upload.filename),
            "info",
        )
    if new or submission.enqueued_at is None:  # a replay of a request that failed before this
        enqueue(current_app.extensions["celery"], db(), [submission.id])
    return redirect(url_for("portal.submission", submission_id=submission.id), 303)


@blueprint.route("/submissions")
@login_required
def history():
    submissions = (
        db()
        .scalars(
            select(Submission)
            .join(Exercise)
            .where(Submission.user_id == g.user.id, Exercise.course_id == g.course.id)
            .order_by(Submission.id.desc())
        )
        .all()
    )
    return render_template("portal/history.html", submissions=submissions)


@blueprint.route("/submissions/<int:submission_id>")
@login_required
def submission(submission_id: int):
    row = _mine(submission_id)
    result = submission_dict(db(), submission_state(db(), row.id), g.lang)
    return render_template(
        "portal/submission.html",
        submission=row,
        result=result,
        view=page_view(row, result),
        waiting=row.status in WAITING,
        grade=student_grade(db(), row.user_id, row.exercise_id),
        runs=run_rows(row) if g.role in STAFF_ROLES else [],
        later=_later_submissions(row) if g.role in STAFF_ROLES else [],
        # staff's own files have no student page, nor exceptions
        of_a_student=role_in(db(), row.user_id, g.course.id) == CourseRole.student.value,
    )


def _later_submissions(row: Submission) -> list[Submission]:
    """For staff adjusting a score: what the student sent to the exercise after this one."""
    return list(
        db().scalars(
            select(Submission)
            .where(
                Submission.user_id == row.user_id,
                Submission.exercise_id == row.exercise_id,
                Submission.id > row.id,
            )
            .order_by(Submission.id)
            .options(defer(Submission.code))
        )
    )


@blueprint.route("/submissions/<int:submission_id>/status")
@login_required
def status(submission_id: int):
    """What the submission page asks while it waits; with ?after=<the status it shows>, held
    until the submission leaves that status (live.py)."""
    database = current_app.extensions["hpcgrade.db"]

    def read():
        with database.reads() as reads:  # a connection only while reading, never while held
            return submission_state(reads, submission_id)

    state = read()
    if (
        state is None
        or state.course_id != g.course.id
        or not may_see(state.user_id, g.user.id, g.role)
    ):
        abort(404)
    db().close()  # the log-in's session: its connection goes back to the pool before any hold
    state = live.once_changed(
        state,
        read,
        lambda s: s and s.status,
        request.args.get("after"),
        request.environ.get("wsgi.multithread", False),
    )
    if state is None:  # deleted while held
        abort(404)
    with database.reads() as reads:
        return jsonify(
            status=state.status,
            **waiting(reads, state, g.lang),
            score=state.score,
            counted_score=state.counted_score,
            max_score=state.max_score,
        )
