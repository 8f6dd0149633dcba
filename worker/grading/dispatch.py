"""Dispatch: queued submissions become runs on an executor; reports become grades.

`dispatch` claims queued submissions in their queue's order (server/core/queue.py: each student's
earlier files first, round-robin between courses, then between a course's students, at most
MAX_RUNNING_PER_STUDENT of a student's in flight) and hands them to the executor. A run's
exercise is its slug among its course's exercises (two courses may have exercises of the same
slug), and its job's shape is its course's (worker/grading/shapes.py): runs of two courses never
share a job, nor a pilot. A synchronous executor (local) grades
the first before it returns, and records it at once, waiting for a database that is away
rather than dropping the report. With Slurm, runs that fit a live pilot of their course go to it
at once; the others are packed by shape into batches, each sent as one job when it is full
(SLURM_BATCH_SIZE), when no job of ours waits to start, or when its oldest submission has waited
SLURM_BATCH_WAIT seconds.

`collect` (worker/grading/collect.py) records the reports and settles the runs whose jobs
ended; both end runs through worker/grading/recorder.py, and server/core/runs.py writes their
states.

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
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Callable

from sqlalchemy import exists, func, select, update

from server.core import runs
from server.core.catalogue import ExerciseConfigError, ExerciseInfo
from server.core.config import Resources, Settings
from server.core.counters import count
from server.core.courses import course_catalogue
from server.core.db import Database
from server.core.models import (
    Course,
    Exercise,
    GradingRun,
    RunStatus,
    Submission,
    SubmissionStatus,
    aware,
    utcnow,
)
from server.core.queue import TURNS
from worker.grading import cluster_state, liveness
from worker.grading.collect import Collector
from worker.grading.executor import (
    Executor,
    ImpossibleRequest,
    JobState,
    NotTakingJobs,
    SubmitError,
)
from worker.grading.pilots import Pilots
from worker.grading.recorder import Recorder
from worker.grading.shapes import Shape, course_shape
from worker.harness import spool
from worker.harness.jobs import REQUIRED_LAYERS, Job, Limits
from worker.harness.report import Report

log = logging.getLogger(__name__)
MOST_PER_CYCLE = 1000
PILOT_REPORT_WAIT = 2.0  # a warm pilot grades in tens of milliseconds: wait that long, not a poll
# first and longest wait between tries to record while the database is away
RECORD_BACKOFF = (0.25, 4.0)
# of a batch job's time limit, what goes before its first run (the queue's start, the modules,
# the harness's own start): the rest is shared out between its runs by their exercises' budgets
JOB_START_SECONDS = 120
# a course's exercises by slug, as its folder holds them
Exercises = Callable[[Course], dict[str, ExerciseInfo]]


@dataclass(frozen=True)
class CourseGrading:
    """What grading a course's runs needs: its exercises, and its shape before theirs."""

    exercises: dict[str, ExerciseInfo]
    shape: Shape
    # why its exercises folder cannot be read: its runs wait, lest they hold back other courses'
    unread: str | None = None


@dataclass(frozen=True)
class Dispatched:
    """What one dispatch did: the outcome for each submission it settled (graded, failed…),
    whether a queued submission may be claimed now (a run ended, so a student's next file or a
    failed run's next try may be due: send another dispatch), and the seconds until a waiting
    batch is due."""

    outcomes: dict[int, runs.Settled] = field(default_factory=dict)
    more: bool = False
    due_in: float | None = None


@dataclass
class Dispatcher:
    database: Database
    executor: Executor
    # how a course's exercises are read; a fixed catalogue (tests, a tool grading one folder)
    # stands for every course's
    exercises: Exercises | dict[str, ExerciseInfo]
    spool: Path
    resources: Resources  # the SLURM_* settings, under each course's own
    worker: str
    lease: dt.timedelta
    batch_size: int = 1
    batch_wait: float = 0.0
    pilots: Pilots | None = None
    per_student: int = 1
    required_layers: tuple[str, ...] = REQUIRED_LAYERS
    spool_min_free_mb: InitVar[int] = 0  # the recorder's: SPOOL_MIN_FREE_MB
    # the collector's: seconds a job may wait for the cluster to start it, and between two polls
    pending_limit: InitVar[float] = math.inf
    poll_every: InitVar[float] = 0.0
    # each course's exercises and shape, read once by this dispatcher (a task's)
    _courses: dict[int, CourseGrading] = field(default_factory=dict, init=False)
    recorder: Recorder = field(init=False)
    collector: Collector = field(init=False)

    def __post_init__(
        self, spool_min_free_mb: int, pending_limit: float, poll_every: float
    ) -> None:
        if isinstance(self.exercises, dict):
            fixed = self.exercises
            self.exercises = lambda course: fixed
        self.recorder = Recorder(self.database, self.executor, self.spool, spool_min_free_mb)
        self.collector = Collector(self.recorder, self.pilots, pending_limit, poll_every)

    def collect(self) -> dict[int, runs.Settled]:
        """Record the reports that came, and settle the runs whose jobs ended (Collector)."""
        return self.collector.collect()

    @classmethod
    def from_settings(
        cls,
        database: Database,
        executor: Executor,
        settings: Settings,
        node: str | None = None,
        exercises: Exercises | dict[str, ExerciseInfo] = course_catalogue,
    ) -> "Dispatcher":
        """`node`: the Celery node this worker process belongs to, recorded on its runs."""
        return cls(
            database,
            executor,
            exercises,
            Path(settings.spool_dir),
            settings.slurm_resources,
            liveness.worker_name(node),
            dt.timedelta(seconds=settings.grading_lease_seconds),
            settings.slurm_batch_size,
            settings.slurm_batch_wait,
            Pilots(Path(settings.spool_dir)) if not executor.synchronous else None,
            settings.max_running_per_student,
            settings.sandbox_required_layers,
            settings.spool_min_free_mb,
            pending_limit=settings.slurm_pending_limit_seconds,
            poll_every=settings.slurm_poll_seconds,
        )

    # --- dispatch ---------------------------------------------------------------------------

    def dispatch(self, now: dt.datetime | None = None) -> Dispatched:
        """Synchronous executors grade the first submission of the queue; asynchronous ones
        take every queued submission whose batch is ready: the queue's order decides, never
        which submission's arrival sent the message. With the spool nearly full nothing is
        claimed: the runs wait, their tries unused, until space is made."""
        if not self.recorder.spool_takes_runs():
            return Dispatched()
        if self.executor.synchronous:
            return self._grade_next()
        return self._dispatch_batches(now or utcnow())

    def recover(self, dead: Callable[[str | None], bool]) -> list[int]:
        """Runs whose worker is dead, or whose lease ran out, go back to the queue."""
        return liveness.recover(self.database.sessions, dead)

    def _grade_next(self) -> Dispatched:
        claimed, lease_ends = None, time.monotonic() + self.lease.total_seconds()
        with self.database.sessions.begin() as session:
            while claimed is None:
                first = self._queued(session, most=1)
                if not first:
                    return Dispatched()
                claimed = runs.claim(
                    session, first[0][0], self.executor.name, self.worker, self.lease
                )
        outcome = self._grade(claimed, lease_ends)
        with self.database.sessions() as session:
            more = bool(self._queued(session, most=1, lock=False))
        return Dispatched({claimed.submission_id: outcome}, more)

    def _grade(self, claimed: runs.Claim, lease_ends: float) -> str:
        try:
            job = self.spool_run(claimed)
        except OSError as exc:
            job, report = None, Report.grader_error(f"cannot write the spool: {exc}")
        else:
            if job is not None:
                self.executor.submit([job], self.exercise(claimed.course_id, claimed.exercise)[1])
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
                    return runs.record(session, run_id, report)
            except liveness.DATABASE_AWAY as exc:
                if time.monotonic() + wait > deadline:
                    raise
                log.warning("run %s: cannot record its report, trying again: %s", run_id, exc)
            time.sleep(random.uniform(wait / 2, wait))
            wait = min(wait * 2, RECORD_BACKOFF[1])

    def _report(self, claimed: runs.Claim, job: Job | None) -> Report:
        if job is None:
            return Report.grader_error(
                f"exercise {claimed.exercise} is not installed", claimed.exercise
            )
        return self.executor.read_report(job.id) or Report.grader_error(
            "no report", claimed.exercise, job.id
        )

    def spool_run(self, claimed: runs.Claim, seed: int | None = None) -> Job | None:
        """The run's folder in the spool, and its job; None if its exercise is not installed.
        An exercise whose shape has no GPU is graded on the CPU, whatever the node has. The
        hidden inputs are drawn from `seed`; without one, the harness draws a fresh seed for
        the run (a preview run reuses its submission's last one), and reports it."""
        info, shape = self.exercise(claimed.course_id, claimed.exercise)
        if info is None:
            return None
        job = info.job(
            None,
            filename=claimed.filename,
            seed=seed,
            job_id=str(claimed.run_id),
            device="cpu" if shape.gpus == 0 else "auto",
            required_layers=self.required_layers,
        )
        return spool.write_run(self.spool, job, claimed.code)

    def exercise(
        self, course_id: int, slug: str, session=None
    ) -> tuple[ExerciseInfo | None, Shape]:
        """The course's exercise of this slug (None: not installed) and the shape of its runs:
        its course's, with its `[slurm]` on top."""
        course = self._course(course_id, session)
        info = course.exercises.get(slug)
        return info, info.resources(course.shape) if info else course.shape

    def _course(self, course_id: int, session=None) -> CourseGrading:
        if course_id not in self._courses:
            if session is None:
                with self.database.sessions() as own:
                    return self._course(course_id, own)
            course = session.get(Course, course_id)
            shape = course_shape(course, self.resources)
            try:
                self._courses[course_id] = CourseGrading(self.exercises(course), shape)
            except (ExerciseConfigError, OSError) as exc:
                log.error(
                    "course %s: its runs wait, its exercises cannot be read: %s", course.slug, exc
                )
                self._courses[course_id] = CourseGrading({}, shape, str(exc))
        return self._courses[course_id]

    def _dispatch_batches(self, now: dt.datetime) -> Dispatched:
        with self.database.sessions.begin() as session:
            # seconds the cluster is not taking jobs for (cluster_state.py): pilots still are
            resting = cluster_state.resting_seconds(session, self.executor.name, now) or None
            batches, due_in = self._plan(
                session, self._queued(session), now, self._job_waiting(session)
            )
            if resting is not None:
                batches = [batch for batch in batches if batch[1]]
            claimed = []
            for shape, pilot, ids in batches:
                executor = "pilot" if pilot else self.executor.name
                claims = [
                    runs.claim(session, i, executor, self.worker, self.lease, now) for i in ids
                ]
                claimed.append((shape, pilot, [c for c in claims if c is not None]))
        outcomes: dict[int, runs.Settled] = {}
        for shape, pilot, claims in claimed:
            if not claims:
                continue
            if resting is not None and not pilot:  # sbatch would fail the same way
                self.recorder.release([c.run_id for c in claims])
                continue
            try:
                sent = self._send(shape, pilot, claims)
            except NotTakingJobs as exc:
                resting = exc.retry_in
                continue
            submission_of = {c.run_id: c.submission_id for c in claims}
            outcomes |= {submission_of[run_id]: outcome for run_id, outcome in sent.items()}
        if resting is not None:
            due_in = resting if due_in is None else min(due_in, resting)
        return Dispatched(outcomes, False, due_in)

    def _queued(
        self, session, most: int = MOST_PER_CYCLE, lock: bool = True
    ) -> list[tuple[int, int, str, dt.datetime]]:
        """(id, course, exercise, queued since) of the queued submissions that may be claimed
        now, in the queue's order; locked for us (others skip them) unless `lock` is False.
        One whose previous run is still on (a regrade asked meanwhile) waits for it, and so do
        those of a course whose exercises cannot be read."""
        while True:
            unread = [course for course, state in self._courses.items() if state.unread]
            rows = session.execute(self._queue(most, lock, unread)).all()
            # a course read for the first time may turn out unreadable: ask again without it
            if not any(self._course(course, session).unread for _, course, _, _ in rows):
                return [(i, course, slug, aware(when)) for i, course, slug, when in rows]

    def _queue(self, most: int, lock: bool, unread: list[int]):
        since = func.coalesce(Submission.enqueued_at, Submission.submitted_at)
        running = exists().where(
            GradingRun.submission_id == Submission.id, GradingRun.status == RunStatus.running.value
        )
        query = (
            select(Submission.id, Exercise.course_id, Exercise.slug, since)
            .join(Exercise)
            .join(TURNS, TURNS.c.id == Submission.id)
            .where(
                Submission.status == SubmissionStatus.queued.value,
                ~running,
                TURNS.c.turn <= self.per_student,
                Exercise.course_id.not_in(unread),
            )
            .order_by(TURNS.c.position)
            .limit(most)
        )
        return query.with_for_update(of=Submission, skip_locked=True) if lock else query

    def _job_waiting(self, session) -> bool:
        """Whether a job of ours waits for the cluster to start it (as last polled)."""
        return session.scalar(
            select(
                exists().where(
                    GradingRun.status == RunStatus.running.value,
                    GradingRun.executor == self.executor.name,
                    GradingRun.job_state == "PENDING",
                )
            )
        )

    def _plan(
        self, session, queued: list, now: dt.datetime, job_waiting: bool
    ) -> tuple[list[tuple[Shape, str | None, list[int]]], float | None]:
        """Batches to send now, as (shape, pilot or None, submission ids), and the seconds until
        the next partial batch is due. A partial batch goes at once while no job of ours waits
        to start: waiting for more runs would only delay it; while one waits, the runs that
        come meanwhile gather into one job, for SLURM_BATCH_WAIT at most (as Nagle's algorithm
        holds small packets while one is unacknowledged)."""
        by_shape: dict[Shape, list[tuple[int, dt.datetime, float]]] = defaultdict(list)
        for submission_id, course_id, slug, since in queued:
            info, shape = self.exercise(course_id, slug, session)
            by_shape[shape].append(
                (submission_id, since, spool.run_seconds(info.run_limits if info else Limits()))
            )
        batches, due_in = [], math.inf
        for shape, rows in by_shape.items():
            pilot = self.pilots.choose(shape) if self.pilots else None
            if pilot is not None:
                batches.append((shape, pilot, [i for i, _, _ in rows]))
                continue
            full, rows = self.pack(shape, rows)
            batches += [(shape, None, ids) for ids in full]
            if rows:
                waited = (now - min(since for _, since, _ in rows)).total_seconds()
                if waited >= self.batch_wait or not job_waiting:
                    batches.append((shape, None, [i for i, _, _ in rows]))
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

    def _send(
        self, shape: Shape, pilot: str | None, claims: list[runs.Claim]
    ) -> dict[int, runs.Settled]:
        """Submit one batch (to a pilot, or as one job); outcomes of the runs it settled. Raises
        NotTakingJobs, its runs queued again, while the cluster takes no jobs."""
        try:
            jobs = {c.run_id: self.spool_run(c) for c in claims}
        except OSError as exc:  # the shared filesystem is away: try again on a later cycle
            log.error("runs stay queued: cannot write the spool: %s", exc)
            self.recorder.release([c.run_id for c in claims])
            return {}
        missing = {c.run_id: self._report(c, None) for c in claims if jobs[c.run_id] is None}
        outcomes = self.recorder.record(missing)
        sendable = [job for job in jobs.values() if job is not None]
        if not sendable:
            return outcomes
        run_ids = [int(job.id) for job in sendable]
        try:
            ids = (
                self.pilots.assign(pilot, sendable) if pilot else self.submit_batch(sendable, shape)
            )
        except ImpossibleRequest as exc:
            log.error("runs %s refused: %s", run_ids, exc)
            return outcomes | self.recorder.settle(
                run_ids, runs.refuse, f"the cluster cannot run this exercise: {exc}"
            )
        except NotTakingJobs as exc:
            log.error(
                "runs %s stay queued, the cluster is not taking jobs (next try in %.0f s): %s",
                run_ids,
                exc.retry_in,
                exc,
            )
            self.recorder.release(run_ids)
            raise
        except (SubmitError, OSError) as exc:
            log.error("runs %s stay queued: %s", run_ids, exc)
            self.recorder.release(run_ids)
            return outcomes
        state = JobState("RUNNING", self.pilots.node(pilot)) if pilot else JobState("PENDING")
        with self.database.sessions.begin() as session:
            for run_id, external_id in zip(run_ids, ids):
                session.execute(
                    update(GradingRun)
                    .where(GradingRun.id == run_id)
                    .values(external_id=external_id, job_state=state.state, node=state.node)
                )
        if pilot:
            outcomes |= self.recorder.collect_reports(run_ids, wait=PILOT_REPORT_WAIT)
        return outcomes

    def submit_batch(self, jobs: list[Job], shape: Shape) -> list[str]:
        """The executor's submit, unless its cluster is not taking jobs (NotTakingJobs, with
        the seconds left); a failure that passes makes it rest longer, a job that goes through
        ends the rest (worker/grading/cluster_state.py)."""
        with self.database.sessions() as session:
            left = cluster_state.resting_seconds(session, self.executor.name)
        if left:
            raise NotTakingJobs("the cluster is not taking jobs just now", retry_in=left)
        try:
            ids = self.executor.submit(jobs, shape)
        except NotTakingJobs as exc:
            with self.database.sessions.begin() as session:
                exc.retry_in = cluster_state.failed(session, self.executor.name, str(exc))
                count(session, "sbatch_refusals", kind="transient")
            raise
        except ImpossibleRequest:
            with self.database.sessions.begin() as session:
                count(session, "sbatch_refusals", kind="permanent")
            raise
        with self.database.sessions.begin() as session:
            cluster_state.took_a_job(session, self.executor.name)
        return ids

    # --- cancel -----------------------------------------------------------------------------

    def cancel(self, submission_ids: list[int], reason: str = "stopped by staff") -> list[int]:
        """Stop grading these submissions: stopped in the database first (a report that comes
        after is stale), then their runs skipped by the harness, and each job cancelled once no
        other submission's run is left in it. Returns the submissions stopped."""
        cancelled, stopped = [], []
        with self.database.sessions.begin() as session:
            for submission_id in submission_ids:
                submission = session.get(Submission, submission_id, with_for_update=True)
                if submission is None or submission.status in runs.DONE:
                    continue
                stopped += runs.cancel(session, submission, reason)
                cancelled.append(submission_id)
        for run in stopped:
            try:
                spool.mark_cancelled(spool.run_dir(self.spool, str(run.id)))
            except OSError:  # its folder is gone: nothing is left to skip
                pass
        self.recorder.cancel_jobs(
            {r.external_id for r in stopped if r.external_id and r.executor == self.executor.name}
        )
        return cancelled
