"""The instructors' pages: the course at a glance, one exercise, one student, the gradebook
(and its CSV for the university's records), regrading a submission or a whole exercise, and
stopping a submission's grading."""
from __future__ import annotations

import csv
import io

from flask import (Blueprint, Response, abort, current_app, flash, g, redirect, render_template,
                   url_for)
from sqlalchemy import select

from .auth import db, staff_required
from .course import diagnostic_counts, gradebook, standings, students, summaries
from .models import Exercise, Submission, User, utcnow
from .queue import cancel_grading, enqueue
from .results import WAITING
from .submissions import reopen

blueprint = Blueprint("staff", __name__, url_prefix="/staff")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


@blueprint.before_request
@staff_required
def only_staff() -> None:
    """Every page here is for instructors and admins; a student gets 403."""


@blueprint.route("/")
def overview():
    return render_template("staff/overview.html", summaries=summaries(db()),
                           student_count=len(students(db())))


@blueprint.route("/exercises/<slug>")
def exercise(slug: str):
    row = db().scalar(select(Exercise).where(Exercise.slug == slug))
    if row is None:
        abort(404)
    table = standings(db(), row.id)
    return render_template("staff/exercise.html", exercise=row, now=utcnow(),
                           rows=[(student, table.get((student.id, row.id)))
                                 for student in students(db())],
                           diagnostics=diagnostic_counts(db(), row.id).get(row.id, []))


@blueprint.route("/students/<username>")
def student(username: str):
    user = db().scalar(select(User).where(User.username == username))
    if user is None:
        abort(404)
    submissions = db().scalars(select(Submission).where(Submission.user_id == user.id)
                               .order_by(Submission.id.desc())).all()
    return render_template("staff/student.html", student=user, submissions=submissions)


@blueprint.route("/grades")
def grades():
    columns, rows = gradebook(db())
    return render_template("staff/grades.html", columns=columns, rows=rows)


@blueprint.route("/grades.csv")
def grades_csv():
    columns, rows = gradebook(db())
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["username", "name", "email", *(_cell(e.slug) for e in columns)])
    for user, cells in rows:
        writer.writerow([_cell(user.username), _cell(user.name), _cell(user.email),
                         *("" if cell is None or cell.best is None else f"{cell.best:g}"
                           for cell in cells)])
    return Response(out.getvalue(), mimetype="text/csv",
                    headers={"Content-Disposition": "attachment; filename=hpcgrade-grades.csv"})


def _cell(text: str) -> str:
    """Text a spreadsheet shows as text, never runs as a formula (OWASP's CSV injection advice:
    a cell that starts with = + - @, a tab or a carriage return gets a leading quote)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


@blueprint.post("/exercises/<slug>/regrade")
def regrade_exercise(slug: str):
    """Every finished submission of the exercise, graded again (after its checks were fixed):
    they go out together, packed into a few jobs."""
    row = db().scalar(select(Exercise).where(Exercise.slug == slug))
    if row is None:
        abort(404)
    submissions = db().scalars(select(Submission).where(
        Submission.exercise_id == row.id, Submission.status.not_in(WAITING))
        .order_by(Submission.id).with_for_update()).all()
    for submission in submissions:
        reopen(submission)
    db().commit()
    enqueue(current_app.extensions["celery"], db(), [s.id for s in submissions])
    flash(f"{len(submissions)} entregas vuelven a la cola de corrección." if g.lang == "es"
          else f"{len(submissions)} submissions are queued for grading again.", "info")
    return redirect(url_for("staff.exercise", slug=slug), 303)


@blueprint.post("/submissions/<int:submission_id>/cancel")
def cancel(submission_id: int):
    """Stop grading a submission: the workers cancel its run, and its Slurm job once no other
    submission's run is left in it."""
    submission = db().get(Submission, submission_id)
    if submission is None:
        abort(404)
    spanish = g.lang == "es"
    if submission.status not in WAITING:
        flash("Esta entrega no está esperando su corrección." if spanish
              else "This submission is not waiting to be graded.", "error")
    elif cancel_grading(current_app.extensions["celery"], [submission.id]):
        flash(f"Se detiene la corrección de la entrega #{submission.id}." if spanish
              else f"Grading of submission #{submission.id} is being stopped.", "info")
    else:
        flash("La cola de corrección no responde; inténtalo de nuevo." if spanish
              else "The grading queue does not answer; try again.", "error")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)


@blueprint.post("/submissions/<int:submission_id>/regrade")
def regrade(submission_id: int):
    submission = db().get(Submission, submission_id, with_for_update=True)
    if submission is None:
        abort(404)
    spanish = g.lang == "es"
    if submission.status in WAITING:
        flash("Esta entrega ya está esperando su corrección." if spanish
              else "This submission is already waiting to be graded.", "error")
    else:
        reopen(submission)
        db().commit()
        enqueue(current_app.extensions["celery"], db(), [submission.id])
        flash(f"La entrega #{submission.id} vuelve a la cola de corrección." if spanish
              else f"Submission #{submission.id} is queued for grading again.", "info")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)
