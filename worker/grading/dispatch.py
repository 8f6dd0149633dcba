"""Dispatch and collect: queued submissions become runs on an executor, reports become grades.

`dispatch` claims queued submissions in their queue's order (server/core/queue.py: each student's
earlier files first, round-robin between students, at most MAX_RUNNING_PER_STUDENT of a
student's in flight) and hands them to the executor. A synchronous executor (local) grades
the first before it returns, and records it at once, waiting for a database that is away
rather than dropping the report. With Slurm, runs that fit a live pilot go to it at once; the
others are packed by resource shape into batches, each sent as one job when it is full
(SLURM_BATCH_SIZE), when no job of ours waits to start, or when its oldest submission has waited
SLURM_BATCH_WAIT seconds.

`collect` (every COLLECT_SECONDS) records the reports that the harness marked done in the
spool, and every SLURM_POLL_SECONDS asks the executor about the other runs' jobs in one poll.
A job that ended without a run's report sends the run back to the queue (up to MAX_RUNS runs,
then "grader error", never a zero). Only staff's Stop grading cancels (`cancel`: its runs are
cancelled in the database before scancel); a job that the cluster or an administrator ended
(CANCELLED, PREEMPTED, NODE_FAIL, BOOT_FAIL), a batch job or a pilot, sends its runs back
without using an attempt. A job still PENDING after SLURM_PENDING_LIMIT_SECONDS is
cancelled and its runs are grader errors, "cluster unavailable" with squeue's reason (recorded,
as every state seen, on the run); a settled run's job is polled until it ends, and its end
recorded on the run. Reports are trusted over the cluster's word: a job that ended
OUT_OF_MEMORY after writing a correct report is graded. A job is judged ended only when two
polls agree, so a report still on its way through a shared filesystem is not taken for missing.
A batch holds no more runs than its job's time limit allows at their exercises' budgets; the
harness starts no run that could not end in time, and leaves it "not started": such runs go
back to the queue without using an attempt, and so do the runs a job that ended TIMEOUT or
OUT_OF_MEMORY never began (only the run it was grading is charged).

The database is the source of truth: a claim is committed before anything is submitted, and
runs whose submission failed are released as if never claimed. `recover` sends back to the
queue the runs whose worker is dead.
"""
from __future__ import annotations

import datetime as dt
import logging
import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from sqlalchemy import exists, func, select, update

from server.core.catalogue import ExerciseInfo
from server.core.config import Resources, Settings
from server.core.db import Database
from server.core.models import (Exercise, GradingRun, RunStatus, Submission, SubmissionStatus,
                                utcnow)
from server.core.queue import TURNS
from worker.grading import settle as grading
from worker.grading.executor import (WAITING, ClusterError, Executor, ImpossibleRequest,
                                     JobState, NotTakingJobs, SubmitError,
                                     reports_as_they_come)
from worker.grading.pilots import Pilots
from worker.harness import spool
from worker.harness.jobs import REQUIRED_LAYERS, Job, Limits
from worker.harness.report import Report

log = logging.getLogger(__name__)
MOST_PER_CYCLE = 1000
PILOT_REPORT_WAIT = 2.0  # a warm pilot grades in tens of milliseconds: wait that long, not a poll
RECORD_BACKOFF = (0.25, 4.0)  # first and longest wait between tries to record while the database is away
# of a batch job's time limit, what goes before its first run (the queue's start, the modules,
# the harness's own start): the rest is shared out between its runs by their exercises' budgets
JOB_START_SECONDS = 120
# a job that ended so charged only the run it was grading: the others did not cause it
UNCHARGED_ENDS = frozenset({"TIMEOUT", "OUT_OF_MEMORY"})
# the cluster, or an administrator's scancel, ended the job: none of its runs caused it. The
# service's own stops never show here: their runs are cancelled in the database before scancel
CLUSTER_ENDS = frozenset({"CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL"})
# how long after a run was settled its job's end is still looked for, to be recorded on it
FINAL_STATE_WINDOW = dt.timedelta(days=1)
POLLED_AT = ".polled-at"  # in the spool: when a collect last asked the cluster


@dataclass(frozen=True)
class Dispatched:
    """What one dispatch did: the outcome for each submission it settled (graded, failed…),
    whether a queued submission may be claimed now (a run ended, so a student's next file or a
    failed run's next try may be due: send another dispatch), and the seconds until a waiting
    batch is due."""

    outcomes: dict[int, str] = field(default_factory=dict)
    more: bool = False
    due_in: float | None = None


@dataclass
class Dispatcher:
    database: Database
    executor: Executor
    catalogue: dict[str, ExerciseInfo]
    spool: Path
    resources: Resources
    worker: str
    lease: dt.timedelta
    batch_size: int = 1
    batch_wait: float = 0.0
    pilots: Pilots | None = None
    per_student: int = 1
    required_layers: tuple[str, ...] = REQUIRED_LAYERS
    spool_min_free_mb: int = 0
    pending_limit: float = math.inf  # seconds a job may wait for the cluster to start it
    poll_every: float = 0.0  # seconds between two polls of the cluster by collect

    @classmethod
    def from_settings(cls, database: Database, executor: Executor,
                      catalogue: dict[str, ExerciseInfo], settings: Settings,
                      node: str | None = None) -> "Dispatcher":
        """`node`: the Celery node this worker process belongs to, recorded on its runs."""
        return cls(database, executor, catalogue, Path(settings.spool_dir),
                   settings.slurm_resources, grading.worker_name(node),
                   dt.timedelta(seconds=settings.grading_lease_seconds),
                   settings.slurm_batch_size, settings.slurm_batch_wait,
                   Pilots(Path(settings.spool_dir))
                   if not executor.synchronous else None, settings.max_running_per_student,
                   settings.sandbox_required_layers, settings.spool_min_free_mb,
                   pending_limit=settings.slurm_pending_limit_seconds,
                   poll_every=settings.slurm_poll_seconds)

    # --- dispatch ---------------------------------------------------------------------------

    def dispatch(self, submission_ids: list[int], now: dt.datetime | None = None) -> Dispatched:
        """Synchronous executors grade the first submission of the queue; asynchronous ones
        take every queued submission whose batch is ready (the ids only say that something
        arrived). With the spool nearly full nothing is claimed: the runs wait, their tries
        unused, until space is made."""
        if self._spool_full():
            return Dispatched()
        if self.executor.synchronous:
            return self._grade_next()
        return self._dispatch_batches(now or utcnow())

    def _spool_full(self) -> bool:
        free = spool.free_mb(self.spool)
        if free is None or free >= self.spool_min_free_mb:
            return False
        log.error("spool full: %s MB free on %s, SPOOL_MIN_FREE_MB is %s: nothing is sent",
                  free, self.spool, self.spool_min_free_mb)
        return True

    def recover(self, dead: Callable[[str | None], bool]) -> list[int]:
        """Runs whose worker is dead, or whose lease ran out, go back to the queue."""
        return grading.recover(self.database.sessions, dead)

    def _grade_next(self) -> Dispatched:
        claimed, lease_ends = None, time.monotonic() + self.lease.total_seconds()
        with self.database.sessions.begin() as session:
            while claimed is None:
                first = self._queued(session, most=1)
                if not first:
                    return Dispatched()
                claimed = grading.claim(session, first[0][0], self.executor.name, self.worker,
                                        self.lease)
        outcome = self._grade(claimed, lease_ends)
        with self.database.sessions() as session:
            more = bool(self._queued(session, most=1, lock=False))
        return Dispatched({claimed.submission_id: outcome}, more)

    def _grade(self, claimed: grading.Claim, lease_ends: float) -> str:
        try:
            job = self.spool_run(claimed)
        except OSError as exc:
            job, report = None, Report.grader_error(f"cannot write the spool: {exc}")
        else:
            if job is not None:
                self.executor.submit([job], self.resources)
            report = self._report(claimed, job)
        outcome = self._record_patiently(claimed.run_id, report, lease_ends)
        spool.remove_run(self.spool, str(claimed.run_id))
        return outcome

    def _record_patiently(self, run_id: int, report: Report, deadline: float) -> str:
        """Record the report, trying again with back-off while the database is away: the run
        stays this worker's meanwhile (its task is alive), and is recorded within seconds of the
        database's return. Past the lease, another run may have taken over: give up."""
        wait = RECORD_BACKOFF[0]
        while True:
            try:
                with self.database.sessions.begin() as session:
                    return grading.record(session, run_id, report)
            except grading.DATABASE_AWAY as exc:
                if time.monotonic() + wait > deadline:
                    raise
                log.warning("run %s: cannot record its report, trying again: %s", run_id, exc)
            time.sleep(random.uniform(wait / 2, wait))
            wait = min(wait * 2, RECORD_BACKOFF[1])

    def _report(self, claimed: grading.Claim, job: Job | None) -> Report:
        if job is None:
            return Report.grader_error(f"exercise {claimed.exercise} is not installed",
                                       claimed.exercise)
        return self.executor.read_report(job.id) or Report.grader_error(
            "no report", claimed.exercise, job.id)

    def spool_run(self, claimed: grading.Claim, seed: int | None = None) -> Job | None:
        """The run's folder in the spool, and its job; None if its exercise is not installed.
        An exercise whose shape has no GPU is graded on the CPU, whatever the node has. The
        hidden inputs are drawn from `seed`; without one, the harness draws a fresh seed for
        the run (a preview run reuses its submission's last one), and reports it."""
        info = self.catalogue.get(claimed.exercise)
        if info is None:
            return None
        job = info.job(None, filename=claimed.filename, seed=seed, job_id=str(claimed.run_id),
                       device="cpu" if info.resources(self.resources).gpus == 0 else "auto",
                       required_layers=self.required_layers)
        return spool.write_run(self.spool, job, claimed.code)

    def _dispatch_batches(self, now: dt.datetime) -> Dispatched:
        with self.database.sessions.begin() as session:
            batches, due_in = self._plan(self._queued(session), now, self._job_waiting(session))
            claimed = []
            for resources, pilot, ids in batches:
                executor = "pilot" if pilot else self.executor.name
                claims = [grading.claim(session, i, executor, self.worker, self.lease, now)
                          for i in ids]
                claimed.append((resources, pilot, [c for c in claims if c is not None]))
        outcomes: dict[int, str] = {}
        resting = None  # seconds the cluster is not taking jobs for, once sbatch said so
        for resources, pilot, claims in claimed:
            if not claims:
                continue
            if resting is not None and not pilot:  # sbatch would fail the same way
                self._release([c.run_id for c in claims])
                continue
            try:
                sent = self._send(resources, pilot, claims)
            except NotTakingJobs as exc:
                resting = exc.retry_in
                continue
            submission_of = {c.run_id: c.submission_id for c in claims}
            outcomes |= {submission_of[run_id]: outcome for run_id, outcome in sent.items()}
        if resting is not None:
            due_in = resting if due_in is None else min(due_in, resting)
        return Dispatched(outcomes, False, due_in)

    def _queued(self, session, most: int = MOST_PER_CYCLE,
                lock: bool = True) -> list[tuple[int, str, dt.datetime]]:
        """(id, exercise, queued since) of the queued submissions that may be claimed now, in
        the queue's order; locked for us (others skip them) unless `lock` is False.
        One whose previous run is still on (a regrade asked meanwhile) waits for it."""
        since = func.coalesce(Submission.enqueued_at, Submission.submitted_at)
        running = exists().where(GradingRun.submission_id == Submission.id,
                                 GradingRun.status == RunStatus.running.value)
        query = (select(Submission.id, Exercise.slug, since).join(Exercise)
                 .join(TURNS, TURNS.c.id == Submission.id)
                 .where(Submission.status == SubmissionStatus.queued.value, ~running,
                        TURNS.c.turn <= self.per_student)
                 .order_by(TURNS.c.position).limit(most))
        if lock:
            query = query.with_for_update(of=Submission, skip_locked=True)
        return [(i, slug, _aware(when)) for i, slug, when in session.execute(query)]

    def _job_waiting(self, session) -> bool:
        """Whether a job of ours waits for the cluster to start it (as last polled)."""
        return session.scalar(select(exists().where(
            GradingRun.status == RunStatus.running.value, GradingRun.executor == self.executor.name,
            GradingRun.job_state == "PENDING")))

    def _plan(self, queued: list, now: dt.datetime, job_waiting: bool
              ) -> tuple[list[tuple[Resources, str | None, list[int]]], float | None]:
        """Batches to send now, as (shape, pilot or None, submission ids), and the seconds until
        the next partial batch is due. A partial batch goes at once while no job of ours waits
        to start: waiting for more runs would only delay it; while one waits, the runs that
        come meanwhile gather into one job, for SLURM_BATCH_WAIT at most (as Nagle's algorithm
        holds small packets while one is unacknowledged)."""
        by_shape: dict[Resources, list[tuple[int, dt.datetime, float]]] = defaultdict(list)
        for submission_id, slug, since in queued:
            info = self.catalogue.get(slug)
            by_shape[info.resources(self.resources) if info else self.resources].append(
                (submission_id, since, spool.run_seconds(info.run_limits if info else Limits())))
        batches, due_in = [], math.inf
        for resources, rows in by_shape.items():
            pilot = self.pilots.choose(resources) if self.pilots else None
            if pilot is not None:
                batches.append((resources, pilot, [i for i, _, _ in rows]))
                continue
            full, rows = self.pack(resources, rows)
            batches += [(resources, None, ids) for ids in full]
            if rows:
                waited = (now - min(since for _, since, _ in rows)).total_seconds()
                if waited >= self.batch_wait or not job_waiting:
                    batches.append((resources, None, [i for i, _, _ in rows]))
                else:
                    due_in = min(due_in, self.batch_wait - waited)
        return batches, (due_in if due_in != math.inf else None)

    def pack(self, resources: Resources, rows: list) -> tuple[list[list], list]:
        """The full batches of one shape, and the rows left for a batch not full yet (a row:
        id, queued since, seconds; a batch: the ids). A batch is
        full at SLURM_BATCH_SIZE runs, or when the job's time limit (less JOB_START_SECONDS)
        holds no more runs at their exercises' budgets (spool.run_seconds); one run always
        goes, whatever its time."""
        usable = resources.time * 60 - JOB_START_SECONDS
        full, batch, seconds = [], [], 0.0
        for row in rows:
            if batch and (len(batch) >= self.batch_size or seconds + row[2] > usable):
                full.append([i for i, _, _ in batch])
                batch, seconds = [], 0.0
            batch.append(row)
            seconds += row[2]
        if batch and (len(batch) >= self.batch_size or seconds + batch[-1][2] > usable):
            full.append([i for i, _, _ in batch])
            batch = []
        return full, batch

    def _send(self, resources: Resources, pilot: str | None,
              claims: list[grading.Claim]) -> dict[int, str]:
        """Submit one batch (to a pilot, or as one job); outcomes of the runs it settled. Raises
        NotTakingJobs, its runs queued again, while the cluster takes no jobs."""
        try:
            jobs = {c.run_id: self.spool_run(c) for c in claims}
        except OSError as exc:  # the shared filesystem is away: try again on a later cycle
            log.error("runs stay queued: cannot write the spool: %s", exc)
            self._release([c.run_id for c in claims])
            return {}
        missing = {c.run_id: self._report(c, None) for c in claims if jobs[c.run_id] is None}
        outcomes = self._record_reports(missing)
        sendable = [job for job in jobs.values() if job is not None]
        if not sendable:
            return outcomes
        run_ids = [int(job.id) for job in sendable]
        try:
            ids = (self.pilots.assign(pilot, sendable) if pilot
                   else self.executor.submit(sendable, resources))
        except ImpossibleRequest as exc:
            log.error("runs %s refused: %s", run_ids, exc)
            return outcomes | self._settle(run_ids, grading.refuse,
                                           f"the cluster cannot run this exercise: {exc}")
        except NotTakingJobs as exc:
            log.error("runs %s stay queued, the cluster is not taking jobs (next try in %.0f s): "
                      "%s", run_ids, exc.retry_in, exc)
            self._release(run_ids)
            raise
        except (SubmitError, OSError) as exc:
            log.error("runs %s stay queued: %s", run_ids, exc)
            self._release(run_ids)
            return outcomes
        state = JobState("RUNNING", self.pilots.node(pilot)) if pilot else JobState("PENDING")
        with self.database.sessions.begin() as session:
            for run_id, external_id in zip(run_ids, ids):
                session.execute(update(GradingRun).where(GradingRun.id == run_id).values(
                    external_id=external_id, job_state=state.state, node=state.node))
        if pilot:
            outcomes |= self._collect_reports(run_ids, wait=PILOT_REPORT_WAIT)
        return outcomes

    def _release(self, run_ids: list[int]) -> None:
        with self.database.sessions.begin() as session:
            grading.release(session, run_ids)
        for run_id in run_ids:
            spool.remove_run(self.spool, str(run_id))

    # --- cancel -----------------------------------------------------------------------------

    def cancel(self, submission_ids: list[int], reason: str = "stopped by staff") -> list[int]:
        """Stop grading these submissions: stopped in the database first (a report that comes
        after is stale), then their runs skipped by the harness, and each job cancelled once no
        other submission's run is left in it. Returns the submissions stopped."""
        cancelled, runs = [], []
        with self.database.sessions.begin() as session:
            for submission_id in submission_ids:
                submission = session.get(Submission, submission_id, with_for_update=True)
                if submission is None or submission.status in grading.DONE:
                    continue
                for run in [r for r in submission.runs if r.status == RunStatus.running.value]:
                    grading.cancel(session, run.id, reason)
                    runs.append(run)
                grading.stop(submission)
                cancelled.append(submission_id)
        for run in runs:
            try:
                spool.mark_cancelled(spool.run_dir(self.spool, str(run.id)))
            except OSError:  # its folder is gone: nothing is left to skip
                pass
        self._cancel_jobs({r.external_id for r in runs
                           if r.external_id and r.executor == self.executor.name})
        return cancelled

    def _cancel_jobs(self, jobs: set[str]) -> None:
        """Cancel these jobs, those no other submission's run is left in."""
        if not jobs:
            return
        with self.database.sessions() as session:
            shared = set(session.scalars(select(GradingRun.external_id).where(
                GradingRun.status == RunStatus.running.value, GradingRun.external_id.in_(jobs))))
        try:
            self.executor.cancel(sorted(jobs - shared))
        except ClusterError as exc:  # the job runs on, and its reports are stale
            log.warning("cannot cancel jobs %s: %s", sorted(jobs - shared), exc)

    # --- collect ----------------------------------------------------------------------------

    def collect(self) -> dict[int, str]:
        """Record the reports the harness said were done, and send back the runs it left; then,
        at most once per SLURM_POLL_SECONDS, look at every run and settle those whose jobs ended
        without a report. Returns the outcome of every run it changed (graded, failed,
        requeued, error, cancelled). A synchronous executor's runs are recorded by the task
        that graded them."""
        if self.executor.synchronous:
            return {}
        with self.database.sessions() as session:
            runs = session.execute(select(
                GradingRun.id, GradingRun.external_id, GradingRun.executor, GradingRun.job_state,
                GradingRun.job_reason, GradingRun.node, GradingRun.started_at)
                .where(GradingRun.status == RunStatus.running.value,
                       GradingRun.executor.in_((self.executor.name, "pilot")))).all()
        done = spool.done_runs(self.spool) if runs else set()
        outcomes = self._take_done([run.id for run in runs if str(run.id) in done])
        self._forget_stale(done - {str(run.id) for run in runs})
        unended = self._unended_jobs()
        if not (runs or unended) or not self._poll_due():
            return outcomes
        # a mark lost on the way (a harness of an older release) costs one poll's wait
        outcomes |= self._take_done([run.id for run in runs if run.id not in outcomes])
        polled = [run for run in runs if run.id not in outcomes and run.external_id]
        if polled or unended:
            try:
                states = self.executor.poll(sorted({run.external_id for run in polled}
                                                   | set(unended.values())))
            except ClusterError as exc:
                log.warning("cannot poll the cluster, trying again later: %s", exc)
                return outcomes
            outcomes |= self._settle_ended(polled, states)
            self._note({run_id: states[job] for run_id, job in unended.items()
                        if states[job].outcome != "waiting"})
        return outcomes

    def _take_done(self, run_ids: list[int]) -> dict[int, str]:
        """Record these runs' reports; those a batch job left, its time running out, go back to
        the queue, their attempts unused."""
        outcomes = self._collect_reports(run_ids)
        left = [run_id for run_id in run_ids if run_id not in outcomes
                and spool.is_not_started(spool.run_dir(self.spool, str(run_id)))]
        if left:
            self._release(left)
            outcomes |= {run_id: "requeued" for run_id in left}
        return outcomes

    def _forget_stale(self, run_ids: set[str]) -> None:
        """Done marks of runs no longer running whose folders are gone (a report that a poll
        read before the harness marked it done)."""
        for run_id in run_ids:
            if not spool.run_dir(self.spool, run_id).exists():
                spool.forget_done(self.spool, run_id)

    def _poll_due(self) -> bool:
        """Whether the cluster may be asked again: SLURM_POLL_SECONDS after the last time,
        whichever worker process asked (collects take turns; the time is kept in the spool,
        as this host's clock read it)."""
        if self.poll_every <= 0:
            return True
        mark, now = self.spool / POLLED_AT, time.time()
        try:
            if 0 <= now - float(mark.read_text()) < self.poll_every:
                return False
        except (OSError, ValueError):
            pass  # never polled, or the mark is garbled: poll
        spool.write_atomically(spool.make_folder(self.spool) / POLLED_AT, repr(now).encode())
        return True

    def _unended_jobs(self) -> dict[int, str]:
        """Settled runs (graded from their reports, most often) whose job was still on when
        last seen: run id → job, so that the job's end is recorded, not its last state seen."""
        with self.database.sessions() as session:
            return dict(session.execute(select(GradingRun.id, GradingRun.external_id).where(
                GradingRun.executor == self.executor.name,
                GradingRun.status != RunStatus.running.value,
                GradingRun.external_id.is_not(None), GradingRun.job_state.in_(WAITING),
                GradingRun.finished_at > utcnow() - FINAL_STATE_WINDOW)).all())

    def _collect_reports(self, run_ids: list[int], wait: float = 0.0) -> dict[int, str]:
        reports: dict[int, Report] = {}
        for found in reports_as_they_come(self.executor, dict.fromkeys(run_ids), 0.02, wait):
            reports |= found
        return self._record_reports(reports)

    def _record_reports(self, reports: dict[int, Report]) -> dict[int, str]:
        outcomes = {}
        for run_id, report in reports.items():
            with self.database.sessions.begin() as session:
                outcomes[run_id] = grading.record(session, run_id, report)
            spool.remove_run(self.spool, str(run_id))
        return outcomes

    def _settle_ended(self, runs: list, states: dict[str, JobState]) -> dict[int, str]:
        outcomes: dict[int, str] = {}
        changed: dict[int, JobState] = {}
        overdue = []
        # read before any run's folder goes: which runs their jobs began
        started = {run.id for run in runs
                   if spool.was_started(spool.run_dir(self.spool, str(run.id)))}
        for run in runs:
            state = states.get(run.external_id, JobState("VANISHED"))
            if run.executor == "pilot":
                state = self.pilots.check(run.external_id, state)
            ended_before = run.job_state is not None and run.job_state not in WAITING
            if state.outcome == "waiting" or not ended_before:
                if (state.state, state.node or run.node, state.reason) != (
                        run.job_state, run.node, run.job_reason):
                    changed[run.id] = state
                if self._pending_too_long(run, state):
                    overdue.append(run)
                continue
            changed[run.id] = state  # its job's end, recorded on it
            late = self._collect_reports([run.id])
            if late:
                outcomes |= late
                continue
            if self._not_its_fault(run, state, runs, started):
                log.warning("run %s goes back to the queue unused: job %s ended %s",
                            run.id, run.external_id, state.state)
                self._release([run.id])
                outcomes[run.id] = "requeued"
                continue
            where = f" on {state.node}" if state.node else ""
            reason = (f"{'pilot' if run.executor == 'pilot' else 'Slurm'} job {run.external_id} "
                      f"ended {state.state}{where} without a report for this run")
            tail = self.executor.log_tail(run.external_id)
            outcomes |= self._settle([run.id], grading.lose,
                                     reason + (f"\n{tail}" if tail else ""))
        self._note(changed)
        return outcomes | self._give_up(overdue, states)

    def _pending_too_long(self, run, state: JobState) -> bool:
        return (state.state == "PENDING" and run.executor != "pilot"
                and (utcnow() - _aware(run.started_at)).total_seconds() > self.pending_limit)

    def _give_up(self, runs: list, states: dict[str, JobState]) -> dict[int, str]:
        """Runs whose jobs waited past SLURM_PENDING_LIMIT_SECONDS (a node drained, a partition
        down): a grader error, "cluster unavailable" with squeue's reason, never a zero and no
        try used (staff send it again with Retry once the cluster is back). Settled before their
        jobs are cancelled, so that the cancel is the service's own."""
        outcomes = {}
        for run in runs:
            why = states[run.external_id].reason or "no reason given"
            outcomes |= self._settle([run.id], grading.refuse, (
                f"cluster unavailable: Slurm job {run.external_id} waited more than "
                f"{self.pending_limit:.0f} s to start ({why}); it was cancelled"))
        self._cancel_jobs({run.external_id for run in runs})
        return outcomes

    def _not_its_fault(self, run, state: JobState, runs: list, started: set[int]) -> bool:
        """Whether a run its job left without a report goes back without using a try: the
        cluster or an administrator ended the job (a pilot's too), or a batch job ran out of
        time or memory on another run (this one never begun)."""
        if state.state in CLUSTER_ENDS:
            return True
        return (run.executor != "pilot" and state.state in UNCHARGED_ENDS and run.id not in started
                and self._progressed(run.external_id, runs, started))

    def _progressed(self, external_id: str, runs: list, started: set[int]) -> bool:
        """Whether a job began any of its runs: else it never got to grading (its harness could
        not start, or ran out of memory starting), and its runs are charged as before, lest
        they go round for ever."""
        if any(run.id in started for run in runs if run.external_id == external_id):
            return True
        with self.database.sessions() as session:
            return session.scalar(select(func.count()).select_from(GradingRun).where(
                GradingRun.external_id == external_id, GradingRun.executor == self.executor.name,
                GradingRun.status != RunStatus.running.value)) > 0

    def _note(self, states: dict[int, JobState]) -> None:
        """What the cluster said of runs, where it changed (of a run settled, its job's end):
        one transaction."""
        if not states:
            return
        with self.database.sessions.begin() as session:
            for run_id, state in states.items():
                session.execute(update(GradingRun).where(GradingRun.id == run_id).values(
                    job_state=state.state, job_reason=state.reason,
                    node=state.node or GradingRun.node))

    def _settle(self, run_ids: list[int], transition, reason: str) -> dict[int, str]:
        outcomes = {}
        for run_id in run_ids:
            with self.database.sessions.begin() as session:
                outcomes[run_id] = transition(session, run_id, reason)
            spool.remove_run(self.spool, str(run_id))
        return outcomes


def _aware(when: dt.datetime) -> dt.datetime:
    """func.coalesce loses the column type on SQLite: its value comes back naive (in UTC)."""
    return when.replace(tzinfo=dt.timezone.utc) if when.tzinfo is None else when
