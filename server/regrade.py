"""Grading again, with a preview: after fixing an exercise's checks, "Grade all again" grades
every student's latest graded submission into preview runs that change nothing (worker/preview.py),
shows old → new per student with how many went up or down, and publishes on confirmation, or is
discarded. Grading one submission again asks for confirmation first.

A preview run becomes its submission's result only when published, in one transaction, through
the same step as a normal grade (worker/grading.py `take`: the submission's own late penalty
applied). A submission graded again normally since the preview started keeps its newer grade.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from flask import (Blueprint, abort, current_app, flash, g, redirect, render_template, request,
                   url_for)
from flask_babel import gettext as _, ngettext
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session, selectinload

from .auth import db, staff_required
from .course import STUDENT
from .grades import PREVIEW, PREVIEWING, penalised, take
from .models import Exercise, GradingRun, Regrade, Submission, SubmissionStatus, User, utcnow
from .queue import enqueue
from .results import WAITING
from .staff import exercise_or_404
from .submissions import reopen

log = logging.getLogger(__name__)
blueprint = Blueprint("regrade", __name__, url_prefix="/staff")
SAME_SCORE = 1e-9
# the submissions a preview grades: those with a grade, or a grader error to make good
FINISHED = (SubmissionStatus.graded.value, SubmissionStatus.error.value)
# how long a preview's runs may wait for a worker before its page calls them stalled: longer
# than a student's submission waits to be sent again (REQUEUE_AFTER_SECONDS), because the
# preview task waits on its own queue for a free worker process, and every process may be
# grading (a local worker grades a whole submission in its task; another preview holds one for
# its whole length): a busy queue is no reason to offer to start it again
PREVIEW_PICKUP_SECONDS = 600


@blueprint.before_request
@staff_required
def only_staff() -> None:
    """Every page here is for instructors and admins; a student gets 403."""


# --- the data ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class PreviewRow:
    """One submission of a preview: its grade before, and the preview's (late penalty applied)."""

    submission: Submission
    run: GradingRun
    old: float | None
    new: float | None

    @property
    def change(self) -> float | None:
        return None if self.old is None or self.new is None else self.new - self.old


@dataclass(frozen=True)
class Summary:
    total: int
    graded: int  # the runs that finished, failed ones included
    unchanged: int
    up: int
    down: int
    first: int  # a grade where there was none (a grader error before)
    failed: int
    mean_change: float | None


def open_regrade(session: Session, exercise_id: int) -> Regrade | None:
    """The exercise's preview that is neither published nor discarded (at most one)."""
    return session.scalar(select(Regrade).where(
        Regrade.exercise_id == exercise_id, Regrade.published_at.is_(None),
        Regrade.discarded_at.is_(None)))


class AlreadyOpen(Exception):
    """The exercise has a preview open: publish or discard it before another starts."""

    def __init__(self, regrade: Regrade):
        super().__init__(f"regrade {regrade.id} is open")
        self.regrade = regrade


def start(session: Session, exercise: Exercise, user: User, now: dt.datetime) -> Regrade | None:
    """A regrade of the exercise with a preview run for every student's latest finished
    submission, waiting for a worker; None when there is nothing to grade. The exercise is
    locked before its open preview is looked for, so that two instructors clicking at once
    open one preview, not two: the second waits for the first's commit, then finds its
    preview (AlreadyOpen)."""
    session.get(Exercise, exercise.id, with_for_update=True)
    already = open_regrade(session, exercise.id)
    if already is not None:
        raise AlreadyOpen(already)
    latest = (select(func.max(Submission.id)).join(User, Submission.user_id == User.id)
              .where(Submission.exercise_id == exercise.id, Submission.status.in_(FINISHED),
                     STUDENT).group_by(Submission.user_id))
    submissions = session.scalars(select(Submission).where(Submission.id.in_(latest))
                                  .order_by(Submission.id).with_for_update()).all()
    if not submissions:
        return None
    regrade = Regrade(exercise_id=exercise.id, started_by=user.id, started_at=now)
    session.add(regrade)
    session.flush()
    # unclaimed until a worker takes them: if none has by then, the page offers to start again
    waits_until = now + dt.timedelta(seconds=PREVIEW_PICKUP_SECONDS)
    for submission in submissions:
        session.add(GradingRun(
            submission=submission, attempt=len(submission.runs) + 1,
            executor=current_app.config["EXECUTOR"], status=PREVIEWING, regrade_id=regrade.id,
            started_at=now, lease_until=waits_until))
    return regrade


def preview_rows(session: Session, regrade: Regrade) -> list[PreviewRow]:
    """The regrade's runs by student; the page reads them every few seconds while they are
    graded, so the submissions' code stays in the database."""
    submission = selectinload(GradingRun.submission)
    options = [submission.defer(Submission.code), submission.selectinload(Submission.user)]
    if regrade.published_at is not None:  # the grades replaced are read from the runs before
        options.append(submission.selectinload(Submission.runs))
    runs = session.scalars(
        select(GradingRun).join(Submission).join(User, Submission.user_id == User.id)
        .where(GradingRun.regrade_id == regrade.id).order_by(User.username, Submission.id)
        .options(*options))
    return [PreviewRow(run.submission, run, _old_score(run, regrade), _new_score(run))
            for run in runs]


def _old_score(run: GradingRun, regrade: Regrade) -> float | None:
    """The submission's grade as it is; once published, the grade the run replaced (known for
    runs recorded since runs keep their score)."""
    submission = run.submission
    if regrade.published_at is None:
        return submission.score
    before = [r for r in submission.runs if r.status == "done" and r.attempt < run.attempt]
    if not before or before[-1].score is None:
        return None
    return penalised(before[-1].score, submission.penalty)


def _new_score(run: GradingRun) -> float | None:
    if run.status not in (PREVIEW, "done") or run.score is None:
        return None
    return penalised(run.score, run.submission.penalty)


def summarise(rows: list[PreviewRow]) -> Summary:
    finished = [row for row in rows if row.run.status != PREVIEWING]
    graded = [row for row in finished if row.new is not None]
    changes = [row.change for row in graded if row.change is not None]
    return Summary(
        total=len(rows), graded=len(finished),
        unchanged=sum(1 for c in changes if abs(c) <= SAME_SCORE),
        up=sum(1 for c in changes if c > SAME_SCORE),
        down=sum(1 for c in changes if c < -SAME_SCORE),
        first=sum(1 for row in graded if row.old is None),
        failed=len(finished) - len(graded),
        mean_change=sum(changes) / len(changes) if changes else None)


def stalled(rows: list[PreviewRow], now: dt.datetime) -> bool:
    """Whether runs wait that no worker holds (never claimed, or their worker stopped)."""
    return any(row.run.status == PREVIEWING and row.run.lease_until < now for row in rows)


def publish(session: Session, regrade: Regrade, now: dt.datetime) -> tuple[int, int]:
    """Every graded preview run becomes its submission's result, in this one transaction;
    (published, skipped: graded again normally since the preview started)."""
    published = skipped = 0
    runs = session.scalars(select(GradingRun).where(
        GradingRun.regrade_id == regrade.id, GradingRun.status == PREVIEW)
        .order_by(GradingRun.submission_id)).all()
    for run in runs:
        # locked and read again: the preview's rows loaded it before a "Grade again" may have
        # reopened it, and the lock alone keeps the session's stale copy of its attributes
        submission = session.get(Submission, run.submission_id, with_for_update=True,
                                 populate_existing=True)
        if graded_since(submission, run):
            skipped += 1
        else:
            take(run)
            published += 1
    regrade.published_at = now
    return published, skipped


def graded_since(submission: Submission, run: GradingRun) -> bool:
    """Whether the submission was sent to be graded again, or graded, after the preview run."""
    return submission.status in WAITING or any(
        r.status == "done" and r.attempt > run.attempt for r in submission.runs)


def discard(session: Session, regrade: Regrade, now: dt.datetime) -> None:
    """The preview is dropped; its runs still waiting are cancelled (a worker grading them
    stops, and records nothing)."""
    regrade.discarded_at = now
    # a run's error is a note for staff, in English like the workers' (worker/preview.py)
    session.execute(update(GradingRun).where(
        GradingRun.regrade_id == regrade.id, GradingRun.status == PREVIEWING).values(
        status="cancelled", error="the preview was discarded", finished_at=now))


def send(regrade_id: int) -> bool:
    """Ask a worker to grade the preview; False if the broker is away."""
    try:
        current_app.extensions["celery"].send_task("hpcgrade.preview", args=[regrade_id],
                                                   retry=False)
    except Exception as exc:  # kombu raises many types for a broker that is away
        log.warning("regrade %s waits: broker unavailable (%s)", regrade_id, exc)
        return False
    return True


# --- the pages --------------------------------------------------------------------------------

def _regrade(regrade_id: int, lock: bool = False) -> Regrade:
    row = db().get(Regrade, regrade_id, with_for_update=lock)
    if row is None:
        abort(404)
    return row


@blueprint.post("/exercises/<slug>/regrade")
def start_preview(slug: str):
    """"Grade all again": a preview, graded by the workers, published only on confirmation."""
    exercise = exercise_or_404(slug)
    try:
        regrade = start(db(), exercise, g.user, utcnow())
    except AlreadyOpen as already:
        db().rollback()
        flash(_("A preview of this exercise is already open: publish or discard it first."),
              "error")
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
    db().execute(update(GradingRun).where(
        GradingRun.regrade_id == regrade.id, GradingRun.status == PREVIEWING,
        GradingRun.worker.is_(None)).values(lease_until=utcnow()))
    db().commit()
    flash(_("The grading queue does not answer; try again."), "error")


@blueprint.get("/regrades/<int:regrade_id>")
def preview(regrade_id: int):
    regrade = _regrade(regrade_id)
    rows = preview_rows(db(), regrade)
    return render_template("staff/regrade.html", regrade=regrade, rows=rows,
                           summary=summarise(rows), stalled=stalled(rows, utcnow()),
                           exercise=db().get(Exercise, regrade.exercise_id),
                           started_by=db().get(User, regrade.started_by)
                           if regrade.started_by else None)


def _why_closed(regrade: Regrade) -> str | None:
    """Why the preview can change no more (published or discarded already); None while open."""
    if regrade.published_at is not None:
        return _("This preview was published already.")
    if regrade.discarded_at is not None:
        return _("This preview was discarded already.")
    return None


@blueprint.post("/regrades/<int:regrade_id>/publish")
def publish_preview(regrade_id: int):
    regrade = _regrade(regrade_id, lock=True)
    back = redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)
    if closed := _why_closed(regrade):
        flash(closed, "error")
        return back
    rows = preview_rows(db(), regrade)
    if any(row.run.status == PREVIEWING for row in rows):
        flash(_("Some submissions are still being graded: publish when they are all graded, or "
                "discard the preview."), "error")
        return back
    published, skipped = publish(db(), regrade, utcnow())
    db().commit()
    flash(ngettext("%(num)s grade is published.", "%(num)s grades are published.", published),
          "info")
    if skipped:
        flash(ngettext("%(num)s submission was graded again since the preview started: its newer "
                       "grade stands.",
                       "%(num)s submissions were graded again since the preview started: their "
                       "newer grades stand.", skipped), "info")
    failed = summarise(rows).failed
    if failed:
        flash(ngettext("%(num)s submission could not be graded in the preview: it keeps its grade.",
                       "%(num)s submissions could not be graded in the preview: they keep their "
                       "grades.", failed), "info")
    return back


@blueprint.post("/regrades/<int:regrade_id>/discard")
def discard_preview(regrade_id: int):
    regrade = _regrade(regrade_id, lock=True)
    if closed := _why_closed(regrade):
        flash(closed, "error")
    else:
        discard(db(), regrade, utcnow())
        db().commit()
        flash(_("The preview is discarded: no grade changed."), "info")
    return redirect(url_for("regrade.preview", regrade_id=regrade_id), 303)


@blueprint.post("/regrades/<int:regrade_id>/resume")
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
def submission(submission_id: int):
    """Grade one submission again: the page asks, the form's POST confirms. Its grade stands
    until the new one replaces it."""
    row = db().get(Submission, submission_id, with_for_update=request.method == "POST")
    if row is None:
        abort(404)
    if row.status in WAITING:
        flash(_("This submission is already waiting to be graded."), "error")
        return redirect(url_for("portal.submission", submission_id=submission_id), 303)
    if request.method == "GET":
        return render_template("staff/regrade_submission.html", submission=row,
                               previewed=open_regrade(db(), row.exercise_id))
    reopen(row)
    db().commit()
    enqueue(current_app.extensions["celery"], db(), [row.id])
    flash(_("Submission #%(id)s is queued for grading again.", id=row.id), "info")
    return redirect(url_for("portal.submission", submission_id=submission_id), 303)
