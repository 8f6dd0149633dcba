"""A warm harness in its own process, fed jobs as JSON lines (the service side, without torch).

The harness runs under the course venv's Python (`python` argument), with an environment that
holds nothing secret: the database URL, broker password and secret key of the service never
reach it, so they cannot reach a student either.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from worker.harness.jobs import Job
from worker.harness.report import Report

PASSED_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "TMPDIR")
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class HarnessFailed(Exception):
    """The harness process itself failed (not the submission); carries what it printed."""


def harness_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k in PASSED_ENVIRONMENT or k.startswith("SLURM_")}
    env["PYTHONPATH"] = PACKAGE_ROOT
    return env


class HarnessProcess:
    def __init__(self, python: str | None = None, scratch: str | None = None):
        self.python = python
        command = [python or sys.executable, "-m", "worker.harness", "serve"]
        if scratch:
            command += ["--scratch", scratch]
        try:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                            env=harness_environment(), cwd=PACKAGE_ROOT, text=True)
        except OSError as exc:
            raise HarnessFailed(f"cannot run {command[0]}: {exc.strerror}") from None
        ready = self._read()
        if ready.get("ready") is not True:
            self.close()
            raise HarnessFailed(ready.get("error") or f"the harness did not start: {ready}")

    def _read(self) -> dict:
        line = self.process.stdout.readline()
        if not line:
            code = self.process.wait()
            raise HarnessFailed(f"the harness process exited with status {code}")
        return json.loads(line)

    def report_for(self, job: Job) -> Report:
        """The job sent to the harness process, and the report it writes back."""
        try:
            self.process.stdin.write(json.dumps(job.to_dict()) + "\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise HarnessFailed("the harness process is gone") from None
        return Report.parse(self._read(), "the harness's reply")

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "HarnessProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
