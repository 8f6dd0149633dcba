"""Grading by hand, one student after another: a submission's code beside its checks' results
and the form that adjusts its score, with the previous and next submission of the exercise a
key away (static/handgrading.js: n/j, p/k), and the comments the staff saved to give again.

The order is stable while the grader works: by the student's name (as every staff list sorts
them), so that adjusting a score, which may change which submission of a student counts, never
moves the grader back or skips anyone. Two orders:
- "counted" (the default): each student's submission that counts (their best; their latest where
  none is graded yet), one per student who submitted;
- "all": every submission of the course's students, by name, then oldest first.

For the course's teaching assistants and instructors; the score itself is saved by
allowances.override, which comes back here (`after_adjusting`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from flask import abort, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from sqlalchemy import delete, or_, select

from server.core.courses import role_in
from server.core.models import CourseRole, SavedComment, Submission, User, utcnow
from server.web.auth import db
from server.web.course import by_students, standings, students
from server.web.listing import by_name
from server.web.results import page_view, submission_dict, submission_state
from server.web.staff import exercise_or_404, submission_or_404
from server.web.staff_pages import staff_blueprint

blueprint = staff_blueprint("handgrading", __name__)
ORDERS = ("counted", "all")
# a saved comment fills the adjusted score's comment field: the same limit as that field
# (allowances.COMMENT_LIMIT, whose module imports this one)
COMMENT_LIMIT = 2000
# what the score form's buttons send to come back here: this page again, or the next one
THEN_STAY, THEN_NEXT = "stay", "next"


@dataclass(frozen=True)
class Place:
    """Where a submission is in the grader's order: the submissions before and after it."""

    previous: int | None
    next: int | None
    number: int | None  # its rank, counting from 1; None where it is not in the order
    total: int


def _order() -> str:
    order = request.values.get("order", ORDERS[0])
    return order if order in ORDERS else ORDERS[0]


def _sequence(exercise_id: int, order: str) -> list[tuple[tuple, int]]:
    """(sort key, submission id) of the exercise's submissions in the grader's order."""
    people = {user.id: user for user in students(db(), g.course.id)}
    if order == "counted":
        return sorted(
            (by_name(people[user_id]), standing.grade.best_id or standing.latest_id)
            for (user_id, _exercise), standing in standings(db(), g.course.id, exercise_id).items()
            if standing.latest_id is not None
        )
    return sorted(
        (_key(people[row.user_id], row, order), row.id)
        for row in db().execute(
            select(Submission.id, Submission.user_id, Submission.submitted_at).where(
                by_students(g.course.id, exercise_id)
            )
        )
    )


def _key(user: User, submission: Any, order: str) -> tuple:
    """A submission's place in the order: its student's; then, for every submission, its time."""
    return (
        by_name(user)
        if order == "counted"
        else (*by_name(user), submission.submitted_at, submission.id)
    )


def place_of(submission: Submission, order: str) -> Place:
    """The submissions before and after this one: by the student's place where the order has
    one submission per student, so that a submission outside it (an earlier attempt, a staff
    member's own) still leads to its neighbours."""
    sequence = _sequence(submission.exercise_id, order)
    key = _key(submission.user, submission, order)
    before = [number for rank, number in sequence if rank < key]
    after = [number for rank, number in sequence if rank > key]
    ids = [number for _rank, number in sequence]
    return Place(
        previous=before[-1] if before else None,
        next=after[0] if after else None,
        number=ids.index(submission.id) + 1 if submission.id in ids else None,
        total=len(ids),
    )


def saved_comments(submission: Submission) -> list[SavedComment]:
    """The comments saved for the submission's exercise, then those for the whole course."""
    return list(
        db().scalars(
            select(SavedComment)
            .where(
                SavedComment.course_id == g.course.id,
                or_(
                    SavedComment.exercise_id == submission.exercise_id,
                    SavedComment.exercise_id.is_(None),
                ),
            )
            .order_by(SavedComment.exercise_id.is_(None), SavedComment.id)
        )
    )


@blueprint.get("/exercises/<slug>/hand-grading")
def start(slug: str):
    """From the exercise's staff page: its first submission in the grader's order."""
    exercise = exercise_or_404(slug)
    order = _order()
    sequence = _sequence(exercise.id, order)
    if not sequence:
        flash(
            _("No student has submitted to this exercise yet: there is nothing to grade by hand."),
            "info",
        )
        return redirect(url_for("staff.exercise", slug=slug), 303)
    return redirect(url_for("handgrading.grading", submission_id=sequence[0][1], order=order), 303)


@blueprint.get("/submissions/<int:submission_id>/hand-grading")
def grading(submission_id: int):
    return hand_grading_page(submission_id)


def hand_grading_page(submission_id: int) -> str:
    """The page; allowances.override shows it again, with what was typed, when it refuses the
    score."""
    submission = submission_or_404(submission_id)
    order = _order()
    result = submission_dict(db(), submission_state(db(), submission.id), g.lang)
    return render_template(
        "staff/hand_grading.html",
        submission=submission,
        result=result,
        view=page_view(submission, result),
        order=order,
        place=place_of(submission, order),
        saved_comments=saved_comments(submission),
        hand_grading=True,
        of_a_student=role_in(db(), submission.user_id, g.course.id) == CourseRole.student.value,
    )


def came_from_hand_grading() -> bool:
    return request.form.get("then") in (THEN_STAY, THEN_NEXT)


def after_adjusting(submission: Submission) -> str | None:
    """Where allowances.override goes once the score is saved from this page: this page again
    or the next submission's ("Save and go to the next"); None from elsewhere."""
    if not came_from_hand_grading():
        return None
    order = _order()
    target = submission.id
    if request.form["then"] == THEN_NEXT:
        target = place_of(submission, order).next or submission.id
    return url_for("handgrading.grading", submission_id=target, order=order)


@blueprint.post("/submissions/<int:submission_id>/saved-comments")
def save_comment(submission_id: int):
    """A comment saved for the submission's exercise, or for every exercise of the course."""
    submission = submission_or_404(submission_id)
    text = request.form.get("text", "").strip()
    if not text or len(text) > COMMENT_LIMIT:
        flash(_("A saved comment needs from 1 to %(num)s characters.", num=COMMENT_LIMIT), "error")
    else:
        whole_course = request.form.get("scope") == "course"
        db().add(
            SavedComment(
                course_id=g.course.id,
                text=text,
                saved_by=g.user.id,
                saved_at=utcnow(),
                exercise_id=None if whole_course else submission.exercise_id,
            )
        )
        db().commit()
        flash(_("The comment is saved: pick it when you adjust a score."), "info")
    return _back(submission_id)


@blueprint.post("/submissions/<int:submission_id>/saved-comments/<int:comment_id>/forget")
def forget_comment(submission_id: int, comment_id: int):
    """A saved comment removed from the list (the scores it explained keep their words)."""
    submission_or_404(submission_id)
    removed = (
        db()
        .execute(
            delete(SavedComment).where(
                SavedComment.id == comment_id, SavedComment.course_id == g.course.id
            )
        )
        .rowcount
    )
    if not removed:
        abort(404)
    db().commit()
    flash(_("The saved comment is removed from the list."), "info")
    return _back(submission_id)


def _back(submission_id: int):
    return redirect(
        url_for("handgrading.grading", submission_id=submission_id, order=_order()), 303
    )
