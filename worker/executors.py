"""Executors: where a job is graded. One interface, a registry keyed by name (config EXECUTOR).

`local` grades on the worker's own node with one warm harness per worker process. A failure of
the harness is returned as an error report (never raised), so the submission is retried, never
given a zero.
"""
from __future__ import annotations

import atexit
from typing import Protocol

from worker.harness.jobs import Job
from worker.runner import HarnessFailed, HarnessProcess


class Executor(Protocol):
    name: str

    def grade(self, job: Job) -> dict:
        """The harness's report for the job; {"status": "error", ...} when the grader failed."""

    def close(self) -> None: ...


class LocalExecutor:
    """A warm harness in a child process, started by the first job and again if it died."""

    name = "local"

    def __init__(self, config: dict):
        self.python = config.get("COURSE_PYTHON")
        self._harness: HarnessProcess | None = None

    def grade(self, job: Job) -> dict:
        try:
            if self._harness is None or self._harness.process.poll() is not None:
                self._harness = HarnessProcess(python=self.python)
            return self._harness.grade(job)
        except HarnessFailed as exc:
            return {"exercise": job.exercise, "status": "error", "error": str(exc)}

    def close(self) -> None:
        if self._harness is not None:
            self._harness.close()
            self._harness = None


EXECUTORS: dict[str, type] = {"local": LocalExecutor}


def make_executor(config: dict) -> Executor:
    executor = EXECUTORS[config["EXECUTOR"]](config)
    atexit.register(executor.close)
    return executor
