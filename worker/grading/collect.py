"""Collect, every COLLECT_SECONDS: the reports that the harness marked done in the spool are
recorded, and every SLURM_POLL_SECONDS the executor is asked about the other runs' jobs in one
poll. A job that ended without a run's report sends the run back to the queue (up to MAX_RUNS
runs, then "grader error", never a zero). Only staff's Stop grading cancels (`cancel`: its runs
are cancelled in the database before scancel); a job that the cluster or an administrator ended
(CANCELLED, PREEMPTED, NODE_FAIL, BOOT_FAIL), a batch job or a pilot, sends its runs back
without using an attempt. A job still PENDING after SLURM_PENDING_LIMIT_SECONDS is cancelled and
its runs are grader errors, "cluster unavailable" with squeue's reason (recorded, as every state
seen, on the run); a settled run's job is polled until it ends, and its end recorded on the run.
Reports are trusted over the cluster's word: a job that ended OUT_OF_MEMORY after writing a
correct report is graded. A job is judged ended only when two polls agree, so a report still on
its way through a shared filesystem is not taken for missing. A batch holds no more runs than
its job's time limit allows at their exercises' budgets; the harness starts no run that could
not end in time, and leaves it "not started": such runs go back to the queue without using an
attempt, and so do the runs a job that ended TIMEOUT or OUT_OF_MEMORY never began (only the run
it was grading is charged).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select, update

from server.core import conditions, runs
from server.core.conditions import Fault
from server.core.db import Database
from server.core.models import GradingRun, RunStatus, aware, utcnow
from worker.grading.executor import WAITING, ClusterError, Executor, JobState, judged_ended
from worker.grading.pilots import Pilots
from worker.grading.recorder import Recorder
from worker.harness import spool

log = logging.getLogger(__name__)
# a job that ended so charged only the run it was grading: the others did not cause it
UNCHARGED_ENDS = frozenset({"TIMEOUT", "OUT_OF_MEMORY"})
# the cluster, or an administrator's scancel, ended the job: none of its runs caused it. The
# service's own stops never show here: their runs are cancelled in the database before scancel
CLUSTER_ENDS = frozenset({"CANCELLED", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL"})
# how long after a run was settled its job's end is still looked for, to be recorded on it
FINAL_STATE_WINDOW = dt.timedelta(days=1)
POLLED_AT = ".polled-at"  # in the spool: when a collect last asked the cluster


@dataclass
class Collector:
    """A worker's collect (worker/grading/dispatch.py's Dispatcher holds one): runs end through
    its recorder, shared with dispatch."""

    recorder: Recorder
    pilots: Pilots | None
    pending_limit: float  # seconds a job may wait for the cluster to start it
    poll_every: float  # seconds between two polls of the cluster

    @property
    def database(self) -> Database:
        return self.recorder.database

    @property
    def executor(self) -> Executor:
        return self.recorder.executor

    @property
    def spool(self) -> Path:
        return self.recorder.spool

    def collect(self) -> dict[int, runs.Settled]:
        """Record the reports the harness said were done, and send back the runs it left; then,
        at most once per SLURM_POLL_SECONDS, look at every run and settle those whose jobs ended
        without a report. Returns the outcome of every run it changed (graded, failed,
        requeued, error, cancelled). A synchronous executor's runs are recorded by the task
        that graded them."""
        if self.executor.synchronous:
            return {}
        with self.database.sessions() as session:
            running = session.execute(
                select(
                    GradingRun.id,
                    GradingRun.external_id,
                    GradingRun.executor,
                    GradingRun.job_state,
                    GradingRun.job_reason,
                    GradingRun.node,
                    GradingRun.started_at,
                ).where(
                    GradingRun.status == RunStatus.running.value,
                    GradingRun.executor.in_((self.executor.name, "pilot")),
                )
            ).all()
        done = spool.done_runs(self.spool) if running else set()
        outcomes = self._take_done([run.id for run in running if str(run.id) in done])
        self._forget_stale(done - {str(run.id) for run in running})
        unended = self._unended_jobs()
        if not (running or unended) or not self._poll_due():
            return outcomes
        # a mark lost on the way (a harness of an older release) costs one poll's wait
        outcomes |= self._take_done([run.id for run in running if run.id not in outcomes])
        polled = [run for run in running if run.id not in outcomes and run.external_id]
        if polled or unended:
            try:
                states = self.executor.poll(
                    sorted({run.external_id for run in polled} | set(unended.values()))
                )
            except ClusterError as exc:  # logged once, as the fault begins
                with self.database.sessions.begin() as session:
                    conditions.hold(session, Fault.cluster_away, f"cannot poll the cluster: {exc}")
                return outcomes
            with self.database.sessions.begin() as session:
                conditions.clear(session, Fault.cluster_away)
            outcomes |= self._settle_ended(polled, states)
            self._note(
                {
                    run_id: states[job]
                    for run_id, job in unended.items()
                    if states[job].outcome != "waiting"
                }
            )
        return outcomes

    def _take_done(self, run_ids: list[int]) -> dict[int, runs.Settled]:
        """Record these runs' reports; those a batch job left, its time running out, go back to
        the queue, their attempts unused."""
        outcomes = self.recorder.collect_reports(run_ids)
        left = [
            run_id
            for run_id in run_ids
            if run_id not in outcomes
            and spool.is_not_started(spool.run_dir(self.spool, str(run_id)))
        ]
        if left:
            self.recorder.release(left)
            outcomes |= {run_id: runs.Settled.requeued for run_id in left}
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
        try:
            spool.write_atomically(spool.make_folder(self.spool) / POLLED_AT, repr(now).encode())
        except OSError:  # a full spool: the jobs are polled all the same, each cycle
            self.recorder.spool_takes_runs()
        return True

    def _unended_jobs(self) -> dict[int, str]:
        """Settled runs (graded from their reports, most often) whose job was still on when
        last seen: run id → job, so that the job's end is recorded, not its last state seen."""
        with self.database.sessions() as session:
            return dict(
                session.execute(
                    select(GradingRun.id, GradingRun.external_id).where(
                        GradingRun.executor == self.executor.name,
                        GradingRun.status != RunStatus.running.value,
                        GradingRun.external_id.is_not(None),
                        GradingRun.job_state.in_(WAITING),
                        GradingRun.finished_at > utcnow() - FINAL_STATE_WINDOW,
                    )
                ).all()
            )

    def _settle_ended(self, polled: list, states: dict[str, JobState]) -> dict[int, runs.Settled]:
        outcomes: dict[int, runs.Settled] = {}
        changed: dict[int, JobState] = {}
        overdue = []
        stuck: set[str] = set()  # pilots whose harness stopped answering: their jobs cancelled
        # read before any run's folder goes: which runs their jobs began
        started = {
            run.id for run in polled if spool.was_started(spool.run_dir(self.spool, str(run.id)))
        }
        for run in polled:
            state = states.get(run.external_id, JobState("VANISHED"))
            if run.executor == "pilot":
                state = self.pilots.check(run.external_id, state)
            if not judged_ended(run.job_state, state):
                if (state.state, state.node or run.node, state.reason) != (
                    run.job_state,
                    run.node,
                    run.job_reason,
                ):
                    changed[run.id] = state
                if self._pending_too_long(run, state):
                    overdue.append(run)
                continue
            changed[run.id] = state  # its job's end, recorded on it
            late = self.recorder.collect_reports([run.id])
            if late:
                outcomes |= late
                continue
            if self._not_its_fault(run, state, polled, started):
                log.warning(
                    "run %s goes back to the queue unused: job %s ended %s",
                    run.id,
                    run.external_id,
                    state.state,
                )
                self.recorder.release([run.id])
                outcomes[run.id] = runs.Settled.requeued
                continue
            where = f" on {state.node}" if state.node else ""
            reason = (
                f"{'pilot' if run.executor == 'pilot' else 'Slurm'} job {run.external_id} "
                f"ended {state.state}{where} without a report for this run"
            )
            if state.reason:
                reason += f" ({state.reason})"
            tail = self.executor.log_tail(run.external_id)
            outcomes |= self.recorder.settle(
                [run.id], runs.lose, reason + (f"\n{tail}" if tail else "")
            )
            if state.state == "STUCK":  # its run settled first: a try used, not an admin's stop
                stuck.add(run.external_id)
        self._note(changed)
        self.recorder.cancel_jobs(stuck)
        return outcomes | self._give_up(overdue, states)

    def _pending_too_long(self, run, state: JobState) -> bool:
        return (
            state.state == "PENDING"
            and run.executor != "pilot"
            and (utcnow() - aware(run.started_at)).total_seconds() > self.pending_limit
        )

    def _give_up(self, overdue: list, states: dict[str, JobState]) -> dict[int, runs.Settled]:
        """Runs whose jobs waited past SLURM_PENDING_LIMIT_SECONDS (a node drained, a partition
        down): a grader error, "cluster unavailable" with squeue's reason, never a zero and no
        try used (staff send it again with Retry once the cluster is back). Settled before their
        jobs are cancelled, so that the cancel is the service's own."""
        outcomes = {}
        for run in overdue:
            why = states[run.external_id].reason or "no reason given"
            outcomes |= self.recorder.settle(
                [run.id],
                runs.refuse,
                (
                    f"cluster unavailable: Slurm job {run.external_id} waited more than "
                    f"{self.pending_limit:.0f} s to start ({why}); it was cancelled"
                ),
            )
        self.recorder.cancel_jobs({run.external_id for run in overdue})
        return outcomes

    def _not_its_fault(self, run, state: JobState, polled: list, started: set[int]) -> bool:
        """Whether a run its job left without a report goes back without using a try: the
        cluster or an administrator ended the job (a pilot's too), or a batch job ran out of
        time or memory on another run (this one never begun)."""
        if state.state in CLUSTER_ENDS or self._spool_without_room():
            return True
        return (
            run.executor != "pilot"
            and state.state in UNCHARGED_ENDS
            and run.id not in started
            and self._progressed(run.external_id, polled, started)
        )

    def _spool_without_room(self) -> bool:
        """A job that ended without a report while its spool had no room may have had nowhere
        to write it: the spool failed, not the run."""
        return self.recorder.spool_room() is not None

    def _progressed(self, external_id: str, polled: list, started: set[int]) -> bool:
        """Whether a job began any of its runs: else it never got to grading (its harness could
        not start, or ran out of memory starting), and its runs are charged as before, lest
        they go round for ever."""
        if any(run.id in started for run in polled if run.external_id == external_id):
            return True
        with self.database.sessions() as session:
            return (
                session.scalar(
                    select(func.count())
                    .select_from(GradingRun)
                    .where(
                        GradingRun.external_id == external_id,
                        GradingRun.executor == self.executor.name,
                        GradingRun.status != RunStatus.running.value,
                    )
                )
                > 0
            )

    def _note(self, states: dict[int, JobState]) -> None:
        """What the cluster said of runs, where it changed (of a run settled, its job's end):
        one transaction."""
        if not states:
            return
        with self.database.sessions.begin() as session:
            for run_id, state in states.items():
                session.execute(
                    update(GradingRun)
                    .where(GradingRun.id == run_id)
                    .values(
                        job_state=state.state,
                        job_reason=state.reason,
                        node=state.node or GradingRun.node,
                    )
                )
