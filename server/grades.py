"""How a grading run becomes a submission's grade: the late penalty, the run a result comes from,
and the statuses of a regrade's preview runs. Shared by the portal and the workers."""
from __future__ import annotations

from sqlalchemy import func, select

from .models import GradingRun, Submission, SubmissionStatus

# the id of a submission's latest finished run, the one its grade and its result page come from
# (in a query of submissions; None while it has none). Tied to the query's submission only, so
# that a query which also joins runs gets the latest, not each of its own
DONE_RUN = (select(func.max(GradingRun.id))
            .where(GradingRun.submission_id == Submission.id, GradingRun.status == "done")
            .correlate(Submission).scalar_subquery())
# a regrade's preview runs (worker/preview.py): their own statuses, so that nothing that looks
# for a submission's live run ("running") or its result ("done") ever takes one of them
PREVIEWING, PREVIEW = "previewing", "preview"


def take(run: GradingRun) -> None:
    """A graded run becomes its submission's result: the score after the submission's own late
    penalty (a preview run too, when its regrade is published: server/regrade.py)."""
    submission = run.submission
    run.status = "done"
    submission.score = penalised(run.score, submission.penalty)
    submission.max_score = run.max_score
    submission.status = SubmissionStatus.graded.value


def penalised(run_score: float, penalty: float) -> float:
    """A run's score as its submission's grade: less the late penalty (the fraction lost)."""
    return run_score * (1 - penalty)
