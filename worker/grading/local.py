"""The local executor: grades on the worker's own node with one warm harness per course python in
each worker process (a course whose venv differs grades with its own).

Its submit returns once the reports are in, so its runs never wait for a poll. They stay in
this process, where the task that submitted reads them: the spool holds the run's files only. A
failure of the harness is the grader's error report (never raised), so the submission is
retried, never given a zero.
"""

from __future__ import annotations

from pathlib import Path

from server.core.config import Settings
from worker.grading.executor import JobState
from worker.grading.shapes import Shape
from worker.harness.jobs import Job
from worker.harness.report import Report
from worker.harness.runner import HarnessFailed, HarnessProcess


class LocalExecutor:
    """A warm harness in a child process per python, started by its first job and again if it
    died."""

    name = "local"
    synchronous = True

    def __init__(self, settings: Settings):
        self.spool = Path(settings.spool_dir)
        self.python = settings.course_python
        self._harnesses: dict[str | None, HarnessProcess] = {}  # by python (None: ours)
        self._reports: dict[str, Report] = {}  # run id → its report, until read

    def submit(self, jobs: list[Job], shape: Shape | None = None) -> list[str]:
        """`shape`: whose python grades them (its course's; without one, COURSE_PYTHON)."""
        python = (shape.python if shape else None) or self.python
        for job in jobs:
            self._reports[job.id] = self.grade(job, python)
        return [f"local-{job.id}" for job in jobs]

    def grade(self, job: Job, python: str | None) -> Report:
        """The job's report from the warm harness of `python` (None: ours); the harness's
        failure is the grader's error report."""
        harness = None
        try:
            harness = self._harnesses.get(python)
            if harness is None or harness.process.poll() is not None:
                harness = self._harnesses[python] = HarnessProcess(python=python)
            return harness.report_for(job)
        except HarnessFailed as exc:
            return Report.grader_error(str(exc), job.exercise)
        except BaseException:  # the task's time limit, say: the harness is in mid-job
            if harness is not None:
                harness.kill()
            raise

    def poll(self, ids: list[str]) -> dict[str, JobState]:
        return {external_id: JobState("COMPLETED") for external_id in ids}

    def read_report(self, run_id: str) -> Report | None:
        return self._reports.pop(run_id, None)

    def cancel(self, ids: list[str]) -> None:
        """Nothing to stop: a local grade is over when submit returns."""

    def log_tail(self, external_id: str) -> str:
        return ""

    def close(self) -> None:
        while self._harnesses:
            self._harnesses.popitem()[1].close()
