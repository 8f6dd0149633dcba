"""Grading again, with a preview: after fixing an exercise's checks, "Grade all again" grades
every finished submission of every student into preview runs that change nothing
(worker/grading/preview.py), shows each student's grade (grades.Grade) old → new with how many
went up or down, and publishes on confirmation, or is discarded (the preview as data:
server/web/regrade_preview.py). Grading one submission again asks for confirmation first.

The course's staff read a preview; only its instructors (and admins) start, publish, discard or
resume one, or grade a submission again: teaching assistants grade by hand. A regrade or a
submission of another course is not found (404).
"""

from __future__ import annotations

import logging

from flask import (
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import gettext as _
from flask_babel import ngettext

from server.core import task_names
from server.core.models import Exercise, Regrade, RunStatus, User, utcnow
from server.core.queue import enqueue, send_notice
from server.core.runs import unclaimed_previews_stall
from server.web.auth import db, instructor_required
from server.web.regrade_preview import (
    AlreadyOpen,
    Regraded,
    discard,
    exercise_versions,
    is_stale,
    open_regrade,
    preview_rows,
    publish,
    regraded,
    run_counts,
    stalled,
    start,
    summarise,
)
from server.web.results import WAITING
from server.web.staff import exercise_or_404, submission_or_404
from server.web.staff_pages import staff_blueprint
from server.web.submissions import reopen

log = logging.getLogger(__name__)
blueprint = staff_blueprint("regrade", __name__)


def send(regrade_id: int) -> bool:
    """Ask a worker to grade the preview; False if the broker is away."""
    try:
        current_app.extensions["celery"].send_task(
            task_names.PREVIEW, args=[regrade_id], retry=False
        )
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("regrade %s waits: broker unavailable (%s)", regrade_id, exc)
        return False
    return True


# --- the pages --------------------------------------------------------------------------------


def _regrade(regrade_id: int, lock: bool = False) -> Regrade:
    """A regrade of one of the course's exercises."""
    row = db().get(Regrade, regrade_id, with_for_update=lock)
    if row is None or db().get(Exercise, row.exercise_id).course_id != g.course.id:
        abort(404)
    return row


@blueprint.post("/exercises/<slug>/regrade")
@instructor_required
def start_preview(slug: str):
    """ "Grade all again": a preview, graded by the workers, published only on confirmation."""
    exercise = exercise_or_404(slug)
    try:
        regrade = start(db(), exercise, g.user, utcnow())
    except AlreadyOpen as already:
        db().rollback()
        if is_stale(already.regrade, exercise):
            flash(
                _(
                    "The open preview of this exercise started before its checks changed: "
                    "start a fresh one from it."
                ),
                "error",
            )
        else:
            flash(
                _("A preview of this exercise is already open: publish or discard it first."),
                "error",
            )
        return redirect(url_for("regrade.preview", regrade_id=already.regrade.id), 303)
    if regrade is None:
        flash(_("No submission of this exercise has been graded yet."), "error")
        return redirect(url_for("staff.exercise", slug=slug), 303)
    db().commit()
    _send_or_say(regrade)
    return redirect(url_for("regrade.preview", regrade_id=regrade.id), 303)


def _send_or_say(regrade: Regrade) -> None:
    """Send the preview to the workers; when the broker is away, its runs are left for the
    page's "start again" at once."""
    if send(regrade.id):
        return
    unclaimed_previews_stall(db(), regrade.id)
    db().commit()
    flash(_("The grading queue does not answer; try again."), "error")


@blueprint.get("/regrades/<int:regrade_id>")
def preview(regrade_id: int):
    regrade = _regrade(regrade_id)
    rows = preview_rows(db(), regrade)
    exercise = db().get(Exercise, regrade.exercise_id)
    return render_template(
        "staff/regrade.html",
        regrade=regrade,
        rows=rows,
        summary=summarise(rows),
        stalled=stalled(rows, utcnow()),
        versions=exercise_versions(db(), regrade),
        stale=is_stale(regrade, exercise),
        exercise=exercise,
        started_by=db().get(User, regrade.started_by) if regrade.started_by else None,
    )


def _why_closed(regrade: Regrade) -> str | None:
    """Why the preview can change no more (published or discarded already); None while open."""
    if regrade.published_at is not None:
        return _("This preview was published already.")
    if regrade.discarded_at is not None:
        return _("This preview was discarded already.")
    return None


@blueprint.post("/regrades/<int:regrade_id>/publish")
@instructor_required
def publish_preview(regrade_id: int):
    regrade = _regrade(regrade_id, lock=True)
    back = redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)
    if closed := _why_closed(regrade):
        flash(closed, "error")
        return back
    if is_stale(regrade, db().get(Exercise, regrade.exercise_id)):
        flash(
            _(
                "Not published: the exercise's checks changed after this preview started. "
                "Start a fresh preview."
            ),
            "error",
        )
        return back
    counts = run_counts(db(), regrade_id)
    if counts[RunStatus.previewing.value]:
        flash(
            _(
                "Some submissions are still being graded: publish when they are all graded, or "
                "discard the preview."
            ),
            "error",
        )
        return back
    published, skipped = publish(db(), regrade, utcnow())
    db().commit()
    _tell_changed_grades(regrade)
    flash(
        ngettext(
            "The new score of %(num)s submission is published.",
            "The new scores of %(num)s submissions are published.",
            published,
        ),
        "info",
    )
    if skipped:
        flash(
            ngettext(
                "%(num)s submission was graded again since the preview started: its newer "
                "grade stands.",
                "%(num)s submissions were graded again since the preview started: their "
                "newer grades stand.",
                skipped,
            ),
            "info",
        )
    failed = counts[RunStatus.failed.value]
    if failed:
        flash(
            ngettext(
                "%(num)s submission could not be graded in the preview: it keeps its grade.",
                "%(num)s submissions could not be graded in the preview: they keep their grades.",
                failed,
            ),
            "info",
        )
    return back


def _tell_changed_grades(regrade: Regrade) -> None:
    """Each student whose grade the published preview changed is mailed, by a worker, about
    the submission that gives it now."""
    ids = [
        row.new.submission_id
        for row in preview_rows(db(), regrade)
        if row.grade_changed and row.new.submission_id is not None
    ]
    send_notice(current_app.extensions["celery"], "regraded", ids)


@blueprint.post("/regrades/<int:regrade_id>/discard")
@instructor_required
def discard_preview(regrade_id: int):
    regrade = _regrade(regrade_id, lock=True)
    if closed := _why_closed(regrade):
        flash(closed, "error")
    else:
        discard(db(), regrade, utcnow())
        db().commit()
        flash(_("The preview is discarded: no grade changed."), "info")
    return redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)


@blueprint.post("/regrades/<int:regrade_id>/fresh")
@instructor_required
def fresh_preview(regrade_id: int):
    """A preview whose exercise changed since it started is discarded, and a new one started
    with the checks as they are now."""
    regrade = _regrade(regrade_id, lock=True)
    if closed := _why_closed(regrade):
        flash(closed, "error")
        return redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)
    exercise = db().get(Exercise, regrade.exercise_id)
    discard(db(), regrade, utcnow())
    fresh = start(db(), exercise, g.user, utcnow())
    if fresh is None:  # nothing graded to grade again (the course's students' work removed)
        db().commit()
        flash(_("No submission of this exercise has been graded yet."), "error")
        return redirect(url_for("staff.exercise", slug=exercise.slug), 303)
    db().commit()
    _send_or_say(fresh)
    flash(_("A fresh preview started, with the exercise's checks as they are now."), "info")
    return redirect(url_for("regrade.preview", regrade_id=fresh.id), 303)


@blueprint.app_template_global()
def regrade_of(submission_id: int | None) -> Regraded | None:
    """For the student's pages: how a published regrade changed the submission's score."""
    if submission_id is None:
        return None
    return regraded(db(), [submission_id]).get(submission_id)


@blueprint.post("/regrades/<int:regrade_id>/resume")
@instructor_required
def resume_preview(regrade_id: int):
    """A preview that stopped moving (its worker died, or the broker was away) is sent again:
    a worker takes over the runs nobody holds."""
    regrade = _regrade(regrade_id)
    if closed := _why_closed(regrade):
        flash(closed, "error")
    elif stalled(preview_rows(db(), regrade), utcnow()):
        _send_or_say(regrade)
    else:
        flash(_("The preview is being graded; its page shows the progress."), "info")
    return redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)


@blueprint.route("/submissions/<int:submission_id>/regrade", methods=["GET", "POST"])
@instructor_required
def submission(submission_id: int):
    """Grade one submission again: the page asks, the form's POST confirms. Its grade stands
    until the new one replaces it."""
    row = submission_or_404(submission_id, lock=request.method == "POST")
    if row.status in WAITING:
        flash(_("This submission is already waiting to be graded."), "error")
        return redirect(url_for("portal.submission", submission_id=submission_id), 303)
    if request.method == "GET":
        return render_template(
            "staff/regrade_submission.html",
            submission=row,
            previewed=open_regrade(db(), row.exercise_id),
        )
    reopen(row)
    db().commit()
    enqueue(current_app.extensions["celery"], db(), [row.id])
    flash(_("Submission #%(id)s is queued for grading again.", id=row.id), "info")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)
