"""A regrade's preview runs, graded on the worker's executor without touching their submissions.

The portal commits a regrade with one run per submission in status "previewing"
(server/web/regrade.py), then sends the `hpcgrade.preview` task. The task claims the runs nobody
grades (never claimed, their lease ran out, or their worker's process is gone), sends them to
the executor as normal runs go (one at a time on a synchronous executor, so that the page's
progress moves; on Slurm packed into jobs as dispatch packs them, at most SLURM_BATCH_SIZE and
no more than the job's time limit holds at the exercise's budget, then waited for with one poll
every SLURM_POLL_SECONDS; runs a job left "not started" are sent again in a later job), and
records each report as it comes: "preview", with its checks and
score, or "failed". The exercise is the regrade's course's, and the jobs are of that course's
shape (its python, account, job name…), as its students' runs are. Pilots are left to the students: a preview is nobody's wait. Each run is
graded with the seed of the run whose grade it would replace, so that old → new shows what the
checks changed, not another draw of a flaky submission's hidden inputs. A failed run's error is
a note for staff, in English like every worker's: it quotes exceptions and Slurm's own words.

A preview run is never a submission's result (that is the latest "done" run) nor any business
of the recovery (it looks at "running" runs). A preview whose worker died stops moving: its
runs' leases run out, and its page offers to start it again (this task, which claims them,
and cancels the jobs their dead worker left on the cluster) or to discard it. Once the regrade
is discarded, the task stops and cancels its jobs.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable

from sqlalchemy import select, update
from sqlalchemy.orm import selectinload

from server.core import runs
from server.core.models import GradingRun, Regrade, RunStatus, Submission, utcnow
from worker.grading.dispatch import Dispatcher
from worker.grading.executor import (
    ClusterError,
    Executor,
    SubmitError,
    judged_ended,
    ready_reports,
    reports_as_they_come,
)
from worker.harness import spool
from worker.harness.jobs import Limits
from worker.harness.report import Report

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PreviewClaim:
    """A claimed preview run, with the seed of the submission's result run (None: a fresh one).
    Its code is read when its batch is sent: a preview may hold a thousand submissions."""

    run_id: int
    submission_id: int
    exercise: str
    filename: str
    seed: int | None
    course_id: int

    def with_code(self, code: bytes) -> runs.Claim:
        return runs.Claim(
            self.run_id, self.submission_id, self.exercise, self.filename, code, self.course_id
        )


@dataclass
class PreviewGrader:
    dispatcher: Dispatcher
    poll_seconds: float
    # when the leases of the runs this worker holds were last renewed (time.monotonic())
    renewed_at: float = field(default=0.0, init=False)

    def grade_previews(self, regrade_id: int, gone: Callable[[str | None], bool]) -> dict[int, str]:
        """Grade the regrade's preview runs that nobody grades; the outcome of each run."""
        claims, orphaned = self._claim(regrade_id, gone)
        waiting: dict[int, str] = {}  # run id → the executor's id for its job
        # a report its dead worker's job left in the spool is as good as a new one; the job
        # itself is of no more use: its runs are sent again
        outcomes = self._collect(regrade_id, dict.fromkeys((c.run_id for c in claims), ""))
        self.dispatcher.recorder.cancel_jobs(orphaned)
        claims = [c for c in claims if c.run_id not in outcomes]
        claim_of = {c.run_id: c for c in claims}
        for batch in self._batches(claims):
            if not self._open(regrade_id):
                break
            outcomes |= self._send(batch, waiting)
            outcomes |= self._collect(regrade_id, waiting)
        last_seen: dict[str, str] = {}  # job → its state at the poll before
        for found in reports_as_they_come(self.executor, waiting, self.poll_seconds, at_once=False):
            outcomes |= self._record_found(regrade_id, found)
            if not self._open(regrade_id):
                self._cancel(waiting)
                break
            for batch in self._batches([claim_of[r] for r in self._not_started(waiting)]):
                outcomes |= self._send(batch, waiting)
            last_seen, lost = self._ended(waiting, last_seen)
            outcomes |= self._record(lost)
        return outcomes

    def _batches(self, claims: list[PreviewClaim]) -> list[list[PreviewClaim]]:
        """One run at a time on a synchronous executor; else packed as dispatch packs a shape's
        runs (a regrade's runs are of one exercise), the last batch maybe not full."""
        if self.executor.synchronous:
            return [[c] for c in claims]
        if not claims:
            return []
        info, shape = self.dispatcher.exercise(claims[0].course_id, claims[0].exercise)
        seconds = spool.run_seconds(info.run_limits if info else Limits())
        full, rest = self.dispatcher.pack(shape, [(c, None, seconds) for c in claims])
        return full + ([[c for c, _, _ in rest]] if rest else [])

    def _not_started(self, waiting: dict[int, str]) -> list[int]:
        """Runs a job left without starting them, its time running out: they leave `waiting`,
        their folders cleared, to be sent again (what becomes of a normal run too)."""
        left = [
            run_id
            for run_id in waiting
            if spool.is_not_started(spool.run_dir(self.dispatcher.spool, str(run_id)))
        ]
        for run_id in left:
            del waiting[run_id]
            spool.remove_run(self.dispatcher.spool, str(run_id))
        return left

    @property
    def executor(self) -> Executor:
        return self.dispatcher.executor

    def _claim(
        self, regrade_id: int, gone: Callable[[str | None], bool]
    ) -> tuple[list[PreviewClaim], set[str]]:
        """The open regrade's runs that nobody grades, made this worker's, and the jobs their
        last worker sent for them on this executor (orphans: every run still in such a job is
        claimed here, as a worker's runs share its lease and its death). A run of this very
        process is an orphan too: a process runs one task at a time, so its task is over (it
        failed while the database was away, and this is its next try)."""
        now, me = utcnow(), self.dispatcher.worker
        with self.dispatcher.database.sessions.begin() as session:
            regrade = session.get(Regrade, regrade_id, with_for_update=True)
            if regrade is None or regrade.published_at or regrade.discarded_at:
                return [], set()
            submission = selectinload(GradingRun.submission)
            found = session.scalars(
                select(GradingRun)
                .where(
                    GradingRun.regrade_id == regrade_id,
                    GradingRun.status == RunStatus.previewing.value,
                )
                .order_by(GradingRun.id)
                .options(
                    submission.defer(Submission.code),
                    submission.selectinload(Submission.exercise),
                    submission.selectinload(Submission.runs),
                )
            )
            claims, orphaned = [], set()
            for run in found:
                if run.worker not in (None, me) and run.lease_until >= now and not gone(run.worker):
                    continue  # a live task grades it
                lease_until = now + self.dispatcher.lease
                orphan = runs.claim_preview(run, me, self.executor.name, lease_until)
                orphaned |= {orphan} if orphan else set()
                claims.append(_claim_of(run))
        self.renewed_at = time.monotonic()
        return claims, orphaned

    def _open(self, regrade_id: int) -> bool:
        with self.dispatcher.database.sessions() as session:
            return (
                session.scalar(
                    select(Regrade.id).where(
                        Regrade.id == regrade_id,
                        Regrade.published_at.is_(None),
                        Regrade.discarded_at.is_(None),
                    )
                )
                is not None
            )

    def _send(self, claims: list[PreviewClaim], waiting: dict[int, str]) -> dict[int, str]:
        """One job for these runs; what cannot be sent is a failed preview run at once (the
        instructor sees why, and may start a new preview): a preview is not retried."""
        run_ids = [c.run_id for c in claims]
        codes = self._codes(claims)
        try:
            jobs = [
                self.dispatcher.spool_run(c.with_code(codes[c.submission_id]), c.seed)
                for c in claims
            ]
        except OSError as exc:
            return self._fail(run_ids, f"cannot write the spool: {exc}")
        if None in jobs:
            return self._fail(run_ids, f"exercise {claims[0].exercise} is not installed")
        try:
            ids = self.dispatcher.submit_batch(
                jobs, self.dispatcher.exercise(claims[0].course_id, claims[0].exercise)[1]
            )
        except (SubmitError, OSError) as exc:
            return self._fail(run_ids, f"the job was not sent: {exc}")
        waiting |= dict(zip(run_ids, ids))
        with self.dispatcher.database.sessions.begin() as session:
            for run_id, external_id in zip(run_ids, ids):
                session.execute(
                    update(GradingRun)
                    .where(GradingRun.id == run_id)
                    .values(external_id=external_id)
                )
        return {}

    def _codes(self, claims: list[PreviewClaim]) -> dict[int, bytes]:
        with self.dispatcher.database.sessions() as session:
            return dict(
                session.execute(
                    select(Submission.id, Submission.code).where(
                        Submission.id.in_([c.submission_id for c in claims])
                    )
                ).all()
            )

    def _collect(self, regrade_id: int, waiting: dict[int, str]) -> dict[int, str]:
        """Record the reports that appeared (they leave `waiting`)."""
        return self._record_found(regrade_id, ready_reports(self.executor, waiting))

    def _record_found(self, regrade_id: int, reports: dict[int, Report]) -> dict[int, str]:
        """Record these reports; the runs still on are kept this worker's for another lease."""
        outcomes = self._record(reports)
        self._renew(regrade_id)
        return outcomes

    def _renew(self, regrade_id: int) -> None:
        """The runs still on get another lease, once a tenth of a lease has gone by: not at
        each report, which would write every waiting run's row once for each run graded."""
        lease = self.dispatcher.lease
        if time.monotonic() - self.renewed_at < lease.total_seconds() / 10:
            return
        with self.dispatcher.database.sessions.begin() as session:
            runs.renew_previews(session, regrade_id, self.dispatcher.worker, utcnow() + lease)
        self.renewed_at = time.monotonic()

    def _ended(
        self, waiting: dict[int, str], last_seen: dict[str, str]
    ) -> tuple[dict[str, str], dict[int, Report]]:
        """Each job's state at this poll, and an error report for each run whose job is judged
        ended without its report (executor.judged_ended). Those runs leave `waiting`."""
        try:
            states = self.executor.poll(sorted(set(waiting.values())))
        except ClusterError as exc:
            log.warning("cannot poll the cluster, trying again later: %s", exc)
            return last_seen, {}
        lost = {}
        for run_id, job in list(waiting.items()):
            if judged_ended(last_seen.get(job), states[job]):
                lost[run_id] = self.executor.read_report(str(run_id)) or Report.grader_error(
                    f"job {job} ended {states[job].state} without a report for this run"
                )
                del waiting[run_id]
        return {job: state.state for job, state in states.items()}, lost

    def _cancel(self, waiting: dict[int, str]) -> None:
        """The regrade was discarded: its jobs are of no use any more."""
        self.dispatcher.recorder.cancel_jobs(set(waiting.values()))
        for run_id in waiting:
            spool.remove_run(self.dispatcher.spool, str(run_id))

    def _fail(self, run_ids: list[int], reason: str) -> dict[int, str]:
        log.error("preview runs %s failed: %s", run_ids, reason)
        return self._record({run_id: Report.grader_error(reason) for run_id in run_ids})

    def _record(self, reports: dict[int, Report]) -> dict[int, str]:
        """The reports of one collect (a batch job's, on Slurm), in one transaction."""
        if not reports:
            return {}
        with self.dispatcher.database.sessions.begin() as session:
            outcomes = {
                run_id: runs.record_preview(session, run_id, self.dispatcher.worker, report)
                for run_id, report in reports.items()
            }
        for run_id in reports:
            spool.remove_run(self.dispatcher.spool, str(run_id))
        return outcomes


def _claim_of(run: GradingRun) -> PreviewClaim:
    """What grading the run needs, and the seed of the grade it would replace: the latest
    "done" run's (a submission with a grader error has none)."""
    submission = run.submission
    result = [r for r in submission.runs if r.status == RunStatus.done.value]
    return PreviewClaim(
        run.id,
        submission.id,
        submission.exercise.slug,
        submission.filename,
        result[-1].seed if result else None,
        submission.exercise.course_id,
    )
