"""The instructors' pages: the course at a glance, one exercise, one student, the gradebook
(and its CSV for the university's records), and regrading a submission."""
from __future__ import annotations

import csv
import io

from flask import (Blueprint, Response, abort, current_app, flash, g, redirect, render_template,
                   url_for)
from sqlalchemy import select

from worker.grading import reopen

from .auth import db, staff_required
from .course import diagnostic_counts, gradebook, standings, students, summaries
from .models import Exercise, Submission, User, utcnow
from .queue import enqueue
from .results import WAITING

blueprint = Blueprint("staff", __name__, url_prefix="/staff")


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
    writer.writerow(["username", "name", "email", *(e.slug for e in columns)])
    for user, cells in rows:
        writer.writerow([user.username, user.name, user.email,
                         *("" if cell is None or cell.best is None else f"{cell.best:g}"
                           for cell in cells)])
    return Response(out.getvalue(), mimetype="text/csv",
                    headers={"Content-Disposition": "attachment; filename=hpcgrade-grades.csv"})


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
