"""The executor interface: where runs are graded (worker/grading/executors.py has the registry).

A run's files are in the spool (worker/harness/spool.py) before it reaches an executor, and its
report comes back there, written by the trusted grader (the local executor, whose grader answers
on a pipe, keeps it in memory). An executor
- `submit(jobs, resources)` starts grading them and returns an external id per job (runs packed
  into one cluster job share it), or raises SubmitError, carrying the raw output, having started
  nothing (ImpossibleRequest: never will; NotTakingJobs: not for a while);
- `poll(ids)` says what became of those ids, in one call to the cluster whatever their number;
- `read_report(run_id)` is a run's report once it exists (None before), or the grader's
  error report when the platform failed;
- `cancel(ids)` stops them;
- `log_tail(id)` is the end of a job's log, for staff when a job ended without reports.
`submit_and_wait(executor, jobs, resources)` is what its name says, for the terminal.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from server.core.config import Resources
from worker.harness.jobs import Job
from worker.harness.report import Report

# Slurm's job states, which every executor speaks, that may still end with a report
WAITING = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_FED",
                     "REQUEUE_HOLD", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT",
                     "STOPPED"})


@dataclass(frozen=True)
class JobState:
    """What the cluster says of one external id: a Slurm state, or VANISHED when it knows none."""

    state: str
    node: str | None = None
    reason: str | None = None

    @property
    def outcome(self) -> str:
        """waiting, completed, cancelled, or failed (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL,
        PREEMPTED, BOOT_FAIL, VANISHED…: its runs without a report are dispatched again)."""
        if self.state in WAITING:
            return "waiting"
        if self.state in ("COMPLETED", "CANCELLED"):
            return self.state.lower()
        return "failed"


class ClusterError(Exception):
    """A cluster's command failed, or printed what it should not; `output` is its raw output."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(f"{message}: {output.strip()}" if output.strip() else message)
        self.message, self.output = message, output


class SubmitError(ClusterError):
    """Nothing was started."""


class NotTakingJobs(SubmitError):
    """The cluster is not taking jobs just now (sbatch failed in a way that passes): nothing is
    sent for `retry_in` seconds."""

    def __init__(self, message: str, output: str = "", retry_in: float = 0.0):
        super().__init__(message, output)
        self.retry_in = retry_in


class ImpossibleRequest(SubmitError):
    """The cluster can never run this shape (it asks more than any node has, or sbatch refuses
    it for good: an unknown account, QoS, feature…): refused at once, never left pending or
    tried again."""


class Executor(Protocol):
    name: str
    synchronous: bool  # submit returns with the reports written

    def submit(self, jobs: list[Job], resources: Resources) -> list[str]: ...

    def poll(self, ids: list[str]) -> dict[str, JobState]: ...

    def read_report(self, run_id: str) -> Report | None: ...

    def cancel(self, ids: list[str]) -> None: ...

    def log_tail(self, external_id: str) -> str:
        """The end of what the job printed, for the staff's view of a run that ended badly."""

    def close(self) -> None: ...


def submit_and_wait(executor: Executor, jobs: list[Job], resources: Resources,
                    poll_seconds: float = 1.0) -> list[Report]:
    """Submit the jobs together and wait for their reports, in their order (`hpcgrade grade
    --executor slurm`); a job that ended without one gets the grader's error report."""
    ids = dict(zip((job.id for job in jobs), executor.submit(jobs, resources)))
    reports: dict[str, Report] = {}
    while len(reports) < len(jobs):
        reports |= {job.id: report for job in jobs if job.id not in reports
                    and (report := executor.read_report(job.id)) is not None}
        waiting = [job for job in jobs if job.id not in reports]
        if not waiting:
            break
        states = executor.poll(sorted({ids[job.id] for job in waiting}))
        for job in waiting:
            state = states[ids[job.id]]
            if state.outcome != "waiting":
                reports[job.id] = executor.read_report(job.id) or Report.grader_error(
                    f"job {ids[job.id]} ended {state.state} without a report", job.exercise)
        time.sleep(poll_seconds)
    return [reports[job.id] for job in jobs]
