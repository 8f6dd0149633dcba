"""The staff's pages of a course: the course at a glance, one exercise (its pictures, the
submissions behind a diagnostic, every student's latest submission as a zip), one student, the
gradebook (and its CSV for the university's records), and stopping a submission's grading
(grading again is server/web/regrade.py).

For its teaching assistants and instructors. Everything here is the course's (`g.course`): an
exercise, a student or a submission of another course is not found (404), as it would not be
for a user who cannot see that course at all."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from copy import copy
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

from flask import (
    Response,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    stream_with_context,
    url_for,
)
from flask_babel import get_locale
from flask_babel import gettext as _
from sqlalchemy import select

from server.core.grades import maximum_points, terms_of
from server.core.models import Exercise, Submission, User, utcnow
from server.core.queue import cancel_grading
from server.web import charts
from server.web.auth import db
from server.web.course import (
    LatestSubmission,
    Standing,
    check_rates,
    diagnosed_submissions,
    diagnostic_counts,
    gradebook,
    latest_submissions,
    mistake_counts,
    standings,
    student_or_none,
    students,
    summaries,
)
from server.web.i18n import time_zone
from server.web.listing import Listing, arrange, by_name, by_username, requested_listing
from server.web.paging import requested_page
from server.web.results import WAITING
from server.web.spreadsheet import PLAIN, Dialect, cell, course_file, csv_response, for_excel
from server.web.staff_pages import staff_blueprint

blueprint = staff_blueprint("staff", __name__)
# the gradebook sorts by an exercise as ?sort=ex:<slug>: a slug may be "total" or "name" too
EXERCISE_SORT = "ex:"
# what Canvas's gradebook import requires before the assignments, and its row of points (as
# Canvas's own export writes it)
CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
CANVAS_POINTS = "    Points Possible"


@blueprint.route("/")
def overview():
    return render_template(
        "staff/overview.html",
        summaries=summaries(db(), g.course.id, g.lang),
        student_count=len(students(db(), g.course.id)),
    )


def exercise_or_404(slug: str) -> Exercise:
    """The course's exercise, active or not: staff still read the results of a retired one."""
    row = db().scalar(
        select(Exercise).where(Exercise.course_id == g.course.id, Exercise.slug == slug)
    )
    if row is None:
        abort(404)
    return row


def student_or_404(username: str) -> User:
    """A student of the course; another course's, or its staff, are not found here."""
    user = student_or_none(db(), g.course.id, username)
    if user is None:
        abort(404)
    return user


def submission_or_404(submission_id: int, lock: bool = False) -> Submission:
    """A submission to one of the course's exercises (locked for update, where asked)."""
    submission = db().get(Submission, submission_id, with_for_update=lock)
    if submission is None or submission.exercise.course_id != g.course.id:
        abort(404)
    return submission


def _below_half(score: float | None, out_of: float | None) -> bool:
    return bool(out_of) and (score or 0) < out_of / 2


@blueprint.route("/exercises/<slug>")
def exercise(slug: str):
    row = exercise_or_404(slug)
    table = standings(db(), g.course.id, row.id)
    out_of = maximum_points(db(), [row])[row.id]
    everyone = [
        (student, table.get((student.id, row.id))) for student in students(db(), g.course.id)
    ]
    listing, shown = _arranged_standings(everyone, out_of)
    bests = [s.score for s in table.values() if s.score is not None]
    return render_template(
        "staff/exercise.html",
        exercise=row,
        now=utcnow(),
        max_points=out_of,
        rows=shown,
        student_count=len(everyone),
        listing=listing,
        filters={"missing": _("Nothing submitted"), "below": _("Below half the points")},
        histogram=charts.histogram(bests, out_of, "scores-chart") if bests and out_of else None,
        **_analytics(row, table),
    )


def _analytics(row: Exercise, table: dict[tuple[int, int], Standing]) -> dict:
    """What an exercise's page says of its checks and mistakes: each check's pass rates (on the
    students' counted submissions and on all), the named mistakes by number of students, and
    the diagnostics by code with their chart; each links to the submissions behind it."""
    diagnostics = diagnostic_counts(db(), g.course.id, row.id).get(row.id, [])
    counted = {s.grade.best_id for s in table.values() if s.grade.best_id is not None}
    return {
        "checks": check_rates(db(), g.course.id, row.id, counted, g.lang),
        "percent": one_decimal_percent,
        "mistakes": mistake_counts(db(), g.course.id, g.lang, row.id).get(row.id, []),
        "diagnostics": diagnostics,
        "diagnostics_chart": charts.diagnostics_chart(
            [(code, by_students) for code, by_students, _submissions in diagnostics],
            lambda code: url_for("staff.diagnostic", slug=row.slug, code=code),
            "diagnostics-chart",
        )
        if diagnostics
        else None,
    }


def _arranged_standings(
    everyone: list[tuple[User, Standing | None]], out_of: float | None
) -> tuple[Listing, list[tuple[User, Standing | None]]]:
    """An exercise's students, searched, filtered and sorted as the query string asks."""
    filters = {
        "missing": lambda r: r[1] is None,
        "below": lambda r: _below_half(r[1] and r[1].score, out_of),
    }
    keys = {
        "name": lambda r: by_name(r[0]),
        "username": lambda r: by_username(r[0]),
        "attempts": lambda r: r[1].attempts if r[1] else 0,
        "best": lambda r: r[1] and r[1].score,
        "latest": lambda r: r[1] and r[1].latest_at,
    }
    listing = requested_listing(keys, filters)
    return listing, arrange(everyone, listing, lambda r: r[0], keys, filters)


@blueprint.route("/exercises/<slug>/diagnostics/<code>")
def diagnostic(slug: str, code: str):
    """The submissions behind one diagnostic of an exercise (a bar of its chart), by mistake
    (course.mistake_of), not by the words of each student's hint."""
    row = exercise_or_404(slug)
    mistakes = diagnosed_submissions(db(), g.course.id, row.id, code, g.lang)
    return render_template(
        "staff/diagnostic.html",
        exercise=row,
        code=code,
        mistakes=mistakes,
        submissions=len({submission for mistake in mistakes for submission in mistake.submissions}),
    )


@blueprint.route("/exercises/<slug>/submissions.zip")
def submissions_zip(slug: str):
    """Each student's latest submission of the exercise, named by username, streamed as a zip
    (the codes are read one at a time, never all held at once)."""
    row = exercise_or_404(slug)
    latest = latest_submissions(db(), g.course.id, row.id)
    if not latest:
        flash(_("Nobody has submitted this exercise yet: there is nothing to download."), "error")
        return redirect(url_for("staff.exercise", slug=slug), 303)
    return Response(
        stream_with_context(_zipped(latest)),
        mimetype="application/zip",
        headers={"Content-Disposition": f"attachment; filename={row.slug}-submissions.zip"},
    )


class _Chunks:
    """A file a zip is written into and read back from as it grows (it cannot seek back)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> int:
        self._parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        """Nothing to flush: the parts wait for take()."""

    def take(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data


def _zipped(latest: list[LatestSubmission]) -> Iterator[bytes]:
    zone = ZoneInfo(time_zone())
    out = _Chunks()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in latest:
            code = db().scalar(select(Submission.code).where(Submission.id == item.submission_id))
            # a zip stores local times: the course's, as instructors read them
            at = item.submitted_at.astimezone(zone)
            suffix = ".ipynb" if item.filename.lower().endswith(".ipynb") else ".py"
            archive.writestr(
                zipfile.ZipInfo(item.username + suffix, at.timetuple()[:6]),
                code,
                zipfile.ZIP_DEFLATED,
            )
            yield out.take()
    yield out.take()


@blueprint.route("/students/<username>")
def student(username: str):
    user = student_or_404(username)
    submissions = (
        db()
        .scalars(
            select(Submission)
            .join(Exercise)
            .where(Submission.user_id == user.id, Exercise.course_id == g.course.id)
            .order_by(Submission.id.desc())
        )
        .all()
    )
    return render_template(
        "staff/student.html", student=user, submissions=submissions, **_grades_of(user)
    )


def _grades_of(user: User) -> dict:
    """The student's row of the gradebook, an exercise a line: their grade as it counts (a
    Standing, None for nothing submitted), what the exercise is out of, the late penalty of the
    submission it comes from, and whether they have an exception there; and their total."""
    columns, (row,) = gradebook(db(), g.course.id, only=user.id)
    granted = terms_of(db(), user.id, [column.exercise for column in columns])
    cells = row.cells
    penalties = dict(
        db()
        .execute(
            select(Submission.id, Submission.penalty).where(
                Submission.id.in_([c.grade.best_id for c in cells if c and c.grade.best_id])
            )
        )
        .all()
    )
    lines = [
        StudentGrade(
            column.exercise,
            column.max_points,
            cell,
            # a grade set by hand or an adjusted score lost nothing to lateness
            penalties.get(cell.grade.submission_id, 0.0)
            if cell and not cell.grade.best_adjusted
            else 0.0,
            granted[column.exercise.id].allowance is not None,
        )
        for column, cell in zip(columns, cells)
    ]
    return {"grades": lines, "total": row, "percent": one_decimal_percent}


@dataclass(frozen=True)
class StudentGrade:
    """One line of a student's grades on their staff page."""

    exercise: Exercise
    max_points: float | None
    standing: Standing | None
    penalty: float  # the fraction the late penalty took of the score that counts
    excepted: bool  # a later deadline or extra attempts of their own


@blueprint.route("/grades")
def grades():
    columns, everyone = gradebook(db(), g.course.id)
    filters = {
        "missing": lambda r: r.missing,
        "below": lambda r: r.percent is not None and r.percent < 50,
    }
    keys = {
        "name": lambda r: by_name(r.student),
        "username": lambda r: by_username(r.student),
        "total": lambda r: r.total,
        **{EXERCISE_SORT + column.exercise.slug: _grade_in(i) for i, column in enumerate(columns)},
    }
    listing = requested_listing(keys, filters)
    rows = arrange(everyone, listing, lambda r: r.student, keys, filters)
    return render_template(
        "staff/grades.html",
        columns=columns,
        listing=listing,
        student_count=len(everyone),
        matched=len(rows),
        page=requested_page(rows),
        percent=one_decimal_percent,
        out_of=sum(column.max_points or 0 for column in columns),
        filters={"missing": _("Missing an exercise"), "below": _("Below half the points")},
    )


def one_decimal_percent(value: float | None) -> str:
    """A percentage to one decimal, as the CSV's percent column has it, written as the reader
    writes percentages: "1.8%" / "1,8 %" (never 1.8 shown as "2 %"); "—" for none."""
    if value is None:
        return "—"
    pattern = copy(get_locale().percent_formats[None])
    pattern.frac_prec = (1, 1)
    return pattern.apply(Decimal(f"{value:.1f}") / 100, get_locale())


def _grade_in(index: int):
    return lambda row: row.cells[index] and row.cells[index].score


@blueprint.route("/grades.csv")
def grades_csv():
    return csv_response(_grades_rows(PLAIN), course_file("grades"))


@blueprint.route("/grades-excel.csv")
def grades_excel_csv():
    """The same table, for Excel to open right: UTF-8 with a byte order mark, and for a reader
    in Spanish `;` between the cells and decimal commas, as a Spanish Excel expects
    (server/web/spreadsheet.py says why not a `sep=` line)."""
    return csv_response(
        _grades_rows(for_excel(g.lang)), course_file("grades-excel"), for_excel(g.lang)
    )


@blueprint.route("/grades-moodle.csv")
def grades_moodle_csv():
    """For Moodle's grade import (CSV): a student a row, no row of maximum points (Moodle would
    read it as a student), each exercise a column to map to a grade item; the students are
    matched by username or email."""
    columns, rows = gradebook(db(), g.course.id)
    return csv_response(
        [
            ["username", "email", *(cell(column.exercise.slug) for column in columns)],
            *(
                [
                    cell(row.student.username),
                    cell(row.student.email),
                    *(PLAIN.number(item and item.score) for item in row.cells),
                ]
                for row in rows
            ),
        ],
        f"{g.course.slug}-moodle.csv",
    )


@blueprint.route("/grades-canvas.csv")
def grades_canvas_csv():
    """For Canvas's gradebook import: the columns Canvas requires before the assignments, its
    "Points Possible" row (which it reads as each new assignment's points, not as a student),
    and the students matched by their SIS Login ID, the username."""
    columns, rows = gradebook(db(), g.course.id)
    return csv_response(
        [
            [*CANVAS_COLUMNS, *(cell(column.exercise.slug) for column in columns)],
            [
                CANVAS_POINTS,
                "",
                "",
                "",
                "",
                *(PLAIN.number(column.max_points) for column in columns),
            ],
            *(
                [
                    cell(row.student.name),
                    "",
                    "",
                    cell(row.student.username),
                    "",
                    *(PLAIN.number(item and item.score) for item in row.cells),
                ]
                for row in rows
            ),
        ],
        f"{g.course.slug}-canvas.csv",
    )


def _grades_rows(dialect: Dialect) -> list[list[str]]:
    """username, name, email, a column per exercise (course order), total and percent; the
    second row holds each column's maximum points."""
    columns, rows = gradebook(db(), g.course.id)
    out_of = sum(column.max_points or 0 for column in columns)
    return [
        [
            "username",
            "name",
            "email",
            *(cell(column.exercise.slug) for column in columns),
            "total",
            "percent",
        ],
        [
            "",
            "max_points",
            "",
            *(dialect.number(column.max_points) for column in columns),
            dialect.number(out_of),
            "100",
        ],
        *(
            [
                cell(row.student.username),
                cell(row.student.name),
                cell(row.student.email),
                *(dialect.number(item and item.score) for item in row.cells),
                dialect.number(row.total),
                dialect.number(row.percent, places=1),
            ]
            for row in rows
        ),
    ]


@blueprint.post("/submissions/<int:submission_id>/cancel")
def cancel(submission_id: int):
    """Stop grading a submission: the workers cancel its run, and its Slurm job once no other
    submission's run is left in it."""
    submission = submission_or_404(submission_id)
    if submission.status not in WAITING:
        flash(_("This submission is not waiting to be graded."), "error")
    elif cancel_grading(current_app.extensions["celery"], [submission.id]):
        flash(_("Grading of submission #%(id)s is being stopped.", id=submission.id), "info")
    else:
        flash(_("The grading queue does not answer; try again."), "error")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)
