"""A warm harness in its own process, fed jobs as JSON lines (the service side, without torch).

The harness runs under the course venv's Python (`python` argument), with an environment that
holds nothing secret: the database URL, broker password and secret key of the service never
reach it, so they cannot reach a student either.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from worker.harness.jobs import Job, Limits
from worker.harness.report import Report
from worker.harness.spool import run_seconds

PASSED_ENVIRONMENT = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "TMPDIR")
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
# a harness's start (importing torch, on a loaded node), and what a job may take beyond
# its longest run (spool.run_seconds): the grader's own deadlines (a call's, the zygote's
# answers) end a run well within it, so a harness that passes it has stopped answering
START_SECONDS = 180.0
ANSWER_MARGIN_SECONDS = 60.0
PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: nothing is loaded after fork


def _die_with_parent() -> None:
    """In the harness's process, before its exec: SIGKILL when its parent dies
    (PR_SET_PDEATHSIG; a stopped harness would wait for ever for the end of its stdin)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class HarnessFailed(Exception):
    """The harness process itself failed (not the submission); carries what it printed."""


class HarnessUnanswered(HarnessFailed):
    """The harness did not answer in time: it was killed, with everything it had started."""


def harness_environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k in PASSED_ENVIRONMENT or k.startswith("SLURM_")}
    env["PYTHONPATH"] = PACKAGE_ROOT
    return env


class HarnessProcess:
    def __init__(self, python: str | None = None, scratch: str | None = None, sealed: bool = True):
        """`sealed`: False only in tests of what the seal stops (worker/harness/seal.py)."""
        self.python = python
        command = [python or sys.executable, "-m", "worker.harness", "serve"]
        if scratch:
            command += ["--scratch", scratch]
        if not sealed:
            command.append("--unsealed")
        try:
            # a session of its own: a harness that stops answering is killed with its zygote;
            # and it dies with the process that drives it (a worker's, however it ended)
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=harness_environment(),
                cwd=PACKAGE_ROOT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            raise HarnessFailed(f"cannot run {command[0]}: {exc.strerror}") from None
        self._unread = b""
        ready = self._read(START_SECONDS, "starting")
        if ready.get("ready") is not True:
            self.close()
            raise HarnessFailed(ready.get("error") or f"the harness did not start: {ready}")

    def _read(self, seconds: float, what: str) -> dict:
        """The harness's next line, within `seconds` (else it is killed: HarnessUnanswered)."""
        deadline = time.monotonic() + seconds
        out = self.process.stdout.fileno()
        while b"\n" not in self._unread:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                self.kill()
                raise HarnessUnanswered(
                    f"the harness did not answer within {seconds:.0f} s "
                    f"({what}): it was stopped, and is replaced"
                )
            chunk = os.read(out, 1 << 20)
            if not chunk:
                code = self.process.wait()
                raise HarnessFailed(f"the harness process exited with status {code}")
            self._unread += chunk
        line, _, self._unread = self._unread.partition(b"\n")
        return json.loads(line)

    def report_for(self, job: Job) -> Report:
        """The job sent to the harness process, and the report it writes back within the
        longest its run may take (HarnessUnanswered after)."""
        try:
            self.process.stdin.write(json.dumps(job.to_dict()).encode() + b"\n")
            self.process.stdin.flush()
        except BrokenPipeError:
            raise HarnessFailed("the harness process is gone") from None
        seconds = run_seconds(Limits.from_dict(job.limits)) + ANSWER_MARGIN_SECONDS
        return Report.parse(self._read(seconds, f"grading {job.exercise}"), "the harness's reply")

    def kill(self) -> None:
        """The harness, its zygote and what they started, at once (a student's process dies
        with its zygote)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except OSError:
            pass
        self.process.wait()

    def close(self) -> None:
        if self.process.stdin:
            try:
                self.process.stdin.close()
            except BrokenPipeError:
                pass
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> "HarnessProcess":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        # an error, or Ctrl-C, in the middle of a job: its answer is nobody's, and closing would
        # wait for the student's code to run out its time (27 s seen after a Ctrl-C)
        if exc_type is None:
            self.close()
        else:
            self.kill()
