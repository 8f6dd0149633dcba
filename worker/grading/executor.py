"""The executor interface: where runs are graded (worker/grading/executors.py has the registry).

A run's files are in the spool (worker/harness/spool.py) before it reaches an executor, and its
report comes back there, written by the trusted grader (the local executor, whose grader answers
on a pipe, keeps it in memory). An executor
- `submit(jobs, shape)` starts grading them with the shape's course python (and, on a cluster,
  its Slurm options: worker/grading/shapes.py) and returns an external id per job (runs packed
  into one cluster job share it), or raises SubmitError, carrying the raw output, having started
  nothing (ImpossibleRequest: never will; NotTakingJobs: not for a while);
- `poll(ids)` says what became of those ids, in one call to the cluster whatever their number;
- `read_report(run_id)` is a run's report once it exists (None before), or the grader's
  error report when the platform failed;
- `cancel(ids)` stops them;
- `log_tail(id)` is the end of a job's log, for staff when a job ended without reports.
`reports_as_they_come` is the one loop that waits for reports (dispatch, a regrade's preview and
`submit_and_wait(executor, jobs, shape)`, for the terminal, all wait with it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import Protocol

from worker.grading.shapes import Shape
from worker.harness.jobs import Job
from worker.harness.report import Report

# Slurm's job states, which every executor speaks, that may still end with a report
WAITING = frozenset(
    {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "RESIZING",
        "SUSPENDED",
        "SIGNALING",
        "STAGE_OUT",
        "STOPPED",
    }
)


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


def judged_ended(last_seen: str | None, now: JobState) -> bool:
    """Whether a job is taken for ended: this poll and the one before it (`last_seen`, its
    state then) both found it ended. One poll alone may beat a report that is still on its way
    through a shared filesystem."""
    return now.outcome != "waiting" and last_seen is not None and last_seen not in WAITING


class ClusterError(Exception):
    """A cluster's command failed, or printed what it should not; `output` is its raw output."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(f"{message}: {output.strip()}" if output.strip() else message)
        self.message, self.output = message, output


class SubmitError(ClusterError):
    """Nothing was started."""


class NotTakingJobs(SubmitError):
    """The cluster is not taking jobs just now (sbatch failed in a way that passes): nothing is
    sent for `retry_in` seconds (worker/grading/cluster_state.py sets them)."""

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

    def submit(self, jobs: list[Job], shape: Shape) -> list[str]: ...

    def poll(self, ids: list[str]) -> dict[str, JobState]: ...

    def read_report(self, run_id: str) -> Report | None: ...

    def cancel(self, ids: list[str]) -> None: ...

    def log_tail(self, external_id: str) -> str:
        """The end of what the job printed, for the staff's view of a run that ended badly."""

    def close(self) -> None: ...


def ready_reports(executor: Executor, waiting: MutableMapping) -> dict:
    """The reports that exist now for the runs in `waiting` (keyed by run id), which leave it."""
    found = {
        run_id: report
        for run_id in list(waiting)
        if (report := executor.read_report(str(run_id))) is not None
    }
    for run_id in found:
        del waiting[run_id]
    return found


def reports_as_they_come(
    executor: Executor,
    waiting: MutableMapping,
    interval: float,
    seconds: float | None = None,
    at_once: bool = True,
) -> Iterator[dict]:
    """Each round, the reports that appeared for the runs in `waiting` (keyed by run id; a run
    leaves it with its report), until none is left or `seconds` have passed; `interval` apart,
    the first at once or (for a caller that has just looked) after an interval. The caller may
    add runs to `waiting` or take them out between rounds."""
    deadline = None if seconds is None else time.monotonic() + seconds
    if not waiting:
        return
    if not at_once:
        time.sleep(interval)
    while True:
        yield ready_reports(executor, waiting)
        if not waiting or (deadline is not None and time.monotonic() >= deadline):
            return
        time.sleep(interval)


def submit_and_wait(
    executor: Executor, jobs: list[Job], shape: Shape, poll_seconds: float = 1.0
) -> list[Report]:
    """Submit the jobs together and wait for their reports, in their order (`hpcgrade grade
    --executor slurm`); a job that ended without one gets the grader's error report."""
    by_id = {job.id: job for job in jobs}
    waiting = dict(zip(by_id, executor.submit(jobs, shape)))  # job id → external id
    last_seen: dict[str, str] = {}  # external id → its state at the poll before
    reports: dict[str, Report] = {}
    for found in reports_as_they_come(executor, waiting, poll_seconds):
        reports |= found
        states = executor.poll(sorted(set(waiting.values()))) if waiting else {}
        for job_id, external_id in list(waiting.items()):
            state = states[external_id]
            if judged_ended(last_seen.get(external_id), state):
                del waiting[job_id]
                reports[job_id] = executor.read_report(job_id) or Report.grader_error(
                    f"job {external_id} ended {state.state} without a report",
                    by_id[job_id].exercise,
                )
        last_seen = {job: state.state for job, state in states.items()}
    return [reports[job.id] for job in jobs]
