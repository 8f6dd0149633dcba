"""Code similarity of an exercise, for its staff: the pairs of students whose counted submissions
are most alike, as the exercise's last comparison found them (a worker makes it:
worker/grading/similarity.py), a button to compare them again, and one pair side by side with
the matching regions marked. A lead for a person to read, never a grade: the pages say so, and
nothing here changes a score.

For the course's teaching assistants and instructors."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from flask import abort, current_app, flash, g, redirect, render_template, url_for
from flask_babel import gettext as _
from markupsafe import Markup, escape
from sqlalchemy import select
from sqlalchemy.orm import joinedload

from server.core.models import SimilarityRun, Submission
from server.core.similarity import compared_text, last_runs, request_comparison
from server.web.auth import db
from server.web.staff import exercise_or_404
from server.web.staff_pages import staff_blueprint

blueprint = staff_blueprint("similarity", __name__)


@dataclass(frozen=True)
class Pair:
    """Two students' submissions and each one's share of its code found in the other."""

    first: Submission
    second: Submission
    similarity: tuple[float, float]
    regions: tuple[list, list]


def _pairs(run: SimilarityRun | None) -> list[Pair]:
    """The run's pairs, most alike first, with their submissions (a pair whose submission is
    gone since is left out)."""
    if run is None or not run.pairs:
        return []
    numbers = {number for pair in run.pairs for number in pair["submissions"]}
    submissions = {
        row.id: row
        for row in db().scalars(
            select(Submission)
            .options(joinedload(Submission.user))
            .where(Submission.id.in_(numbers))
        )
    }
    return [
        Pair(
            submissions[first],
            submissions[second],
            tuple(pair["similarity"]),
            tuple(pair["regions"]),
        )
        for pair in run.pairs
        if (first := pair["submissions"][0]) in submissions
        and (second := pair["submissions"][1]) in submissions
    ]


@blueprint.get("/exercises/<slug>/similarity")
def pairs(slug: str):
    exercise = exercise_or_404(slug)
    finished, pending = last_runs(db(), exercise.id)
    return render_template(
        "staff/similarity.html",
        exercise=exercise,
        run=finished,
        pending=pending,
        pairs=_pairs(finished),
    )


@blueprint.post("/exercises/<slug>/similarity")
def compare(slug: str):
    """Compare the exercise's counted submissions again (a worker does, in the background)."""
    exercise = exercise_or_404(slug)
    if request_comparison(current_app.extensions["celery"], db(), exercise, g.user):
        flash(
            _("The submissions are being compared: reload this page in a minute to see the pairs."),
            "info",
        )
    else:
        flash(
            _("The submissions cannot be compared now (the queue is away): try again later."),
            "error",
        )
    return redirect(url_for("similarity.pairs", slug=slug), 303)


@blueprint.get("/exercises/<slug>/similarity/<int:first>-<int:second>")
def pair(slug: str, first: int, second: int):
    """One pair of the last comparison, side by side, the code the two share marked."""
    exercise = exercise_or_404(slug)
    finished, _pending = last_runs(db(), exercise.id)
    found = next(
        (one for one in _pairs(finished) if (one.first.id, one.second.id) == (first, second)),
        None,
    )
    if found is None:
        abort(404)
    return render_template(
        "staff/similarity_pair.html",
        exercise=exercise,
        run=finished,
        pair=found,
        sides=[
            (submission, share, _marked_lines(compared_text(submission) or "", regions))
            for submission, share, regions in zip(
                (found.first, found.second), found.similarity, found.regions
            )
        ],
    )


def _marked_lines(text: str, regions: list[list[int]]) -> list[Markup]:
    """The text's lines, escaped, each stretch inside a region in a <mark>."""
    inside = [False] * len(text)
    for start, end in regions:
        start, end = max(0, min(start, len(text))), max(0, min(end, len(text)))
        inside[start:end] = [True] * max(0, end - start)
    lines, position = [], 0
    for line in text.split("\n"):
        pieces = []
        for marked, stretch in groupby(range(position, position + len(line)), inside.__getitem__):
            piece = escape("".join(text[index] for index in stretch))
            pieces.append(
                Markup('<mark class="alike">{}</mark>').format(piece) if marked else piece
            )
        lines.append(Markup("").join(pieces))
        position += len(line) + 1
    return lines
