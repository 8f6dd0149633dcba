"""The local executor: grades on the worker's own node with one warm harness per worker process.

Its submit returns once the reports are in the spool, so its runs never wait for a poll. A
failure of the harness is an "error" report (never raised), so the submission is retried, never
given a zero.
"""
from __future__ import annotations

from pathlib import Path

from server.core.config import Resources, Settings
from worker.grading.executor import JobState
from worker.harness import spool
from worker.harness.jobs import Job
from worker.harness.runner import HarnessFailed, HarnessProcess


class LocalExecutor:
    """A warm harness in a child process, started by the first job and again if it died."""

    name = "local"
    synchronous = True

    def __init__(self, settings: Settings):
        self.spool = Path(settings.spool_dir)
        self.python = settings.course_python
        self._harness: HarnessProcess | None = None

    def submit(self, jobs: list[Job], resources: Resources | None = None) -> list[str]:
        for job in jobs:
            spool.write_report(spool.run_dir(self.spool, job.id), self._grade(job))
        return [f"local-{job.id}" for job in jobs]

    def _grade(self, job: Job) -> dict:
        try:
            if self._harness is None or self._harness.process.poll() is not None:
                self._harness = HarnessProcess(python=self.python)
            return self._harness.report_for(job)
        except HarnessFailed as exc:
            return {"exercise": job.exercise, "status": "error", "error": str(exc)}

    def poll(self, ids: list[str]) -> dict[str, JobState]:
        return {external_id: JobState("COMPLETED") for external_id in ids}

    def collect(self, run_id: str) -> dict | None:
        return spool.read_report(spool.run_dir(self.spool, run_id))

    def cancel(self, ids: list[str]) -> None:
        """Nothing to stop: a local grade is over when submit returns."""

    def log_tail(self, external_id: str) -> str:
        return ""

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None
