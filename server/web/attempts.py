"""A student's history of an exercise: every attempt with its score, which one counts and why
(grades.student_grade's rule, not a copy of it), and what changed between two attempts: the
code, line by line, and the checks (passed → failed, points, diagnostics).

Students see their own (/courses/<c>/exercises/<slug>/attempts); the course's staff any
student's (/courses/<c>/staff/students/<username>/attempts/<slug>)."""

from __future__ import annotations

import difflib
from typing import NamedTuple

from flask import Blueprint, abort, g, render_template, request
from sqlalchemy import select

from server.core.grades import DONE_RUN, Grade, maximum_points, student_grade
from server.core.models import Exercise, GradingRun, Submission, SubmissionStatus, User
from server.web.auth import db, login_required, staff_required
from server.web.portal import active_exercise
from server.web.results import code_cells, submission_dict, submission_state
from server.web.staff import exercise_or_404, student_or_404
from server.web.submissions import where

blueprint = Blueprint("attempts", __name__, url_prefix="/courses/<course>")

CONTEXT_LINES = 3  # unchanged lines shown around each change, as `diff -u` shows them
# difflib took 35 s over two files of 40,000 lines (a 1 MB upload) and 0.3 s at most over two
# of 5,000, and two large files differ in more lines than a page can hold: the lines compared
# of each attempt, and the rows of their difference shown
MOST_COMPARED_LINES = 5000
MOST_DIFF_ROWS = 2000


class Attempt(NamedTuple):
    submission: Submission
    graded_score: float | None  # its grading run's score, before any late penalty
    standing: str  # why it counts or not: "counts", "set-by-hand", "lower", "tie", "ungraded"
    previous_id: int | None  # the attempt sent before it, to compare with


class DiffRow(NamedTuple):
    kind: str  # "same", "added", "removed", or "gap" (unchanged lines not shown)
    old: int | None  # the line's number in the older code (in its cell, for a notebook)
    new: int | None
    text: str


class CheckChange(NamedTuple):
    title: str
    before: dict | None  # the check in the older attempt's results (None: it had no such check)
    after: dict | None
    gone: list[dict]  # diagnostics the older attempt had and the newer has not
    new: list[dict]


class Comparison(NamedTuple):
    old: Attempt
    new: Attempt
    code: list[DiffRow]  # [] when the code is the same
    cut: bool  # a code longer than MOST_COMPARED_LINES, or a diff longer than MOST_DIFF_ROWS
    checks: list[CheckChange] | None  # None: one of the two has no results
    unchanged_checks: int


@blueprint.route("/exercises/<slug>/attempts")
@login_required
def mine(slug: str):
    exercise = active_exercise(slug)
    return _history_page(g.user, exercise)


@blueprint.route("/staff/students/<username>/attempts/<slug>")
@staff_required
def of_student(username: str, slug: str):
    return _history_page(student_or_404(username), exercise_or_404(slug))


def _history_page(student: User, exercise: Exercise):
    grade = student_grade(db(), student.id, exercise.id)
    attempts = attempts_of(student.id, exercise.id, grade)
    return render_template(
        "portal/attempts.html",
        student=student,
        exercise=exercise,
        grade=grade,
        max_points=maximum_points(db(), [exercise])[exercise.id],
        attempts=attempts,
        comparison=_requested_comparison(attempts),
        title=exercise.title_es if g.lang == "es" else exercise.title_en,
        own=student.id == g.user.id,
        most_compared_lines=MOST_COMPARED_LINES,
        most_diff_rows=MOST_DIFF_ROWS,
    )


def attempts_of(user_id: int, exercise_id: int, grade: Grade) -> list[Attempt]:
    """The student's submissions of the exercise, newest first, each with why it counts or not
    by `grade` (the rule is grades.Grade's: the first best counted score, unless an instructor
    set the grade)."""
    rows = (
        db()
        .execute(
            select(Submission, GradingRun.score)
            .outerjoin(GradingRun, GradingRun.id == DONE_RUN)
            .where(Submission.user_id == user_id, Submission.exercise_id == exercise_id)
            .order_by(Submission.id)
        )
        .all()
    )
    attempts, previous_id = [], None
    for submission, graded_score in rows:
        attempts.append(
            Attempt(submission, graded_score, _standing(submission, grade), previous_id)
        )
        previous_id = submission.id
    return attempts[::-1]


def _standing(submission: Submission, grade: Grade) -> str:
    if submission.counted_score is None:
        return "ungraded"
    if grade.set_by_hand:
        return "set-by-hand"
    if submission.id == grade.best_id:
        return "counts"
    return "tie" if submission.counted_score == grade.best else "lower"


def _requested_comparison(attempts: list[Attempt]) -> Comparison | None:
    """?old=<id>&new=<id>, two of these attempts; by default the latest and the one before."""
    by_id = {attempt.submission.id: attempt for attempt in attempts}
    asked = request.args.get("old", type=int), request.args.get("new", type=int)
    if asked == (None, None):
        return compare(attempts[1], attempts[0]) if len(attempts) >= 2 else None
    if any(chosen not in by_id for chosen in asked):
        abort(404)  # another student's submission, or another exercise's: not in this history
    old, new = sorted(asked)
    return compare(by_id[old], by_id[new]) if old != new else None


def compare(old: Attempt, new: Attempt) -> Comparison:
    old_lines, new_lines = _numbered_lines(old.submission), _numbered_lines(new.submission)
    code, cut = code_diff(old_lines[:MOST_COMPARED_LINES], new_lines[:MOST_COMPARED_LINES])
    cut = cut or max(len(old_lines), len(new_lines)) > MOST_COMPARED_LINES
    before, after = _checks(old.submission), _checks(new.submission)
    if before is None or after is None:
        return Comparison(old, new, code, cut, None, 0)
    checks = check_changes(before, after)
    return Comparison(
        old,
        new,
        code,
        cut,
        [c for c in checks if _changed(c)],
        sum(not _changed(c) for c in checks),
    )


def _numbered_lines(submission: Submission) -> list[tuple[int | None, str]]:
    """The code as its student wrote it, line by line with each line's number; a notebook's
    cells each after a line naming it ("# %% cell 3", the cell marker editors know), numbered
    from 1 in each cell as the result page numbers them."""
    notebook = submission.filename.lower().endswith(".ipynb")
    lines = []
    for label, code in code_cells(submission):
        if notebook:
            lines.append((None, f"# %% {where(None, label, None)}"))
        lines += enumerate(code.splitlines(), start=1)
    return lines


def code_diff(
    old: list[tuple[int | None, str]], new: list[tuple[int | None, str]]
) -> tuple[list[DiffRow], bool]:
    """The lines that changed, with CONTEXT_LINES of unchanged ones around each change and a gap
    row where unchanged lines are left out; ([], False) for the same code."""
    old_texts, new_texts = [text for _n, text in old], [text for _n, text in new]
    if old_texts == new_texts:
        return [], False
    rows: list[DiffRow] = []
    end = 0
    for group in difflib.SequenceMatcher(None, old_texts, new_texts).get_grouped_opcodes(
        CONTEXT_LINES
    ):
        if group[0][1] > end:
            rows.append(DiffRow("gap", None, None, ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [
                    DiffRow("same", old[i][0], new[j][0], old_texts[i])
                    for i, j in zip(range(i1, i2), range(j1, j2))
                ]
                continue
            rows += [DiffRow("removed", old[i][0], None, old_texts[i]) for i in range(i1, i2)]
            rows += [DiffRow("added", None, new[j][0], new_texts[j]) for j in range(j1, j2)]
        end = group[-1][2]
    if end < len(old_texts):
        rows.append(DiffRow("gap", None, None, ""))
    return rows[:MOST_DIFF_ROWS], len(rows) > MOST_DIFF_ROWS


def _checks(submission: Submission) -> list[dict] | None:
    """The checks of the submission's results in the reader's language, as its result page
    shows them; None before it has any."""
    if submission.status != SubmissionStatus.graded.value:
        return None
    return submission_dict(db(), submission_state(db(), submission.id), g.lang)["checks"]


def check_changes(before: list[dict], after: list[dict]) -> list[CheckChange]:
    """Each check of either attempt, in the newer one's order (then any the newer one lacks),
    with the diagnostics that went and came (the same code and message: the same one)."""
    old = {check["name"]: check for check in before}
    new = {check["name"]: check for check in after}
    changes = []
    for name in [*new, *(name for name in old if name not in new)]:
        was, now = old.get(name), new.get(name)
        said_before, said_after = _diagnostics(was), _diagnostics(now)
        changes.append(
            CheckChange(
                (now or was)["title"],
                was,
                now,
                [d for key, d in said_before.items() if key not in said_after],
                [d for key, d in said_after.items() if key not in said_before],
            )
        )
    return changes


def _diagnostics(check: dict | None) -> dict[tuple[str, str], dict]:
    return {(d["code"], d["message"]): d for d in (check or {}).get("diagnostics", [])}


def _changed(change: CheckChange) -> bool:
    if change.before is None or change.after is None:
        return True
    return (
        change.before["passed"] != change.after["passed"]
        or change.before["points"] != change.after["points"]
        or bool(change.gone or change.new)
    )
