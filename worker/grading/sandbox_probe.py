"""The sandbox probe (worker/harness/probe.py) run here or in a Slurm job, and what it found.

A node that lacks a required layer grades nothing (each of its grades is a grader error naming
the layer); an admin learns it here first: `hpcgrade sandbox check` probes this machine (the
demo, the local executor) with each course's python, and `hpcgrade slurm check` a node of each
partition each course's exercises use, with that course's python and Slurm options. The code the
probe must find read-only is the course's exercises folder.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

from server.core.config import Settings
from worker.grading.executor import ClusterError
from worker.grading.shapes import Shape
from worker.grading.slurm import SlurmExecutor
from worker.grading.slurm_text import job_script, parse_sbatch
from worker.harness import spool
from worker.harness.runner import PACKAGE_ROOT, harness_environment

PROBE_SECONDS = 60  # here: a zygote's start, one student process


class ProbeFailed(Exception):
    """The probe could not run, or gave no answer; the message says why."""


def probe_arguments(settings: Settings, code: Path) -> list[str]:
    return ["probe", "--require", ",".join(settings.sandbox_required_layers), "--code", str(code)]


def probe_here(settings: Settings, python: str | None, code: Path) -> dict:
    """The probe run by `python` (None: COURSE_PYTHON, else this one), with the exercises
    folder `code`."""
    command = [
        python or settings.course_python or sys.executable,
        "-m",
        "worker.harness",
        *probe_arguments(settings, code),
    ]
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=PROBE_SECONDS,
            env=harness_environment(),
            cwd=PACKAGE_ROOT,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProbeFailed(f"{command[0]} -m worker.harness probe: {exc}") from None
    return _answer(done.stdout, done.stdout + done.stderr)


def probe_on_slurm(
    slurm: SlurmExecutor, shape: Shape, code: Path, settings: Settings, wait_seconds: float
) -> dict:
    """Submit a probe job of this shape (its course's python and options) and wait for its
    answer in the spool; `code`: the course's exercises folder."""
    folder = spool.make_folder(slurm.spool, "probes")
    out = folder / f"{uuid.uuid4().hex}.json"
    options = slurm.options(shape, "sandbox probe", requeue=False)
    script = job_script(
        options,
        python=slurm.python_of(shape),
        checkout=PACKAGE_ROOT,
        harness=[*probe_arguments(settings, code), "--out", str(out)],
        modules=slurm.modules,
        what="probes the sandbox of a node",
    )
    try:
        job_id = parse_sbatch(slurm.commands.run(["sbatch", "--parsable"], stdin=script))
    except ClusterError as exc:
        raise ProbeFailed(
            f"sbatch refused the probe: {exc.message}: {exc.output.strip()}"
        ) from None
    deadline = time.monotonic() + wait_seconds
    try:
        while time.monotonic() < deadline:
            if out.exists():
                return _answer(out.read_text(), slurm.log_tail(job_id))
            state = slurm.poll([job_id])[job_id]
            if state.outcome != "waiting" and not out.exists():
                raise ProbeFailed(
                    f"probe job {job_id} ended {state.state} without an answer: "
                    f"{slurm.log_tail(job_id).strip()[-500:]}"
                )
            time.sleep(1.0)
        slurm.cancel([job_id])
        raise ProbeFailed(
            f"probe job {job_id} gave no answer in {wait_seconds:g} s "
            "(still pending? `squeue` says why)"
        )
    finally:
        out.unlink(missing_ok=True)


def _answer(text: str, output: str) -> dict:
    try:
        answer = json.loads(text.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise ProbeFailed(f"the probe gave no answer: {output.strip()[-500:]}") from None
    if not isinstance(answer, dict):
        raise ProbeFailed(f"the probe gave no answer: {output.strip()[-500:]}")
    return answer


def unsafe(answer: dict) -> list[str]:
    """What the probe found wrong, one line each, naming the node."""
    where = f"{answer.get('node')} as {answer.get('user')}"
    found = [
        f"{where}: required sandbox layer {layer} is missing: its grades would all be "
        f"grader errors ({'; '.join(answer.get('missing', [])) or 'no reason given'})"
        for layer in answer.get("absent", [])
    ]
    if answer.get("cuda", "ready") != "ready":
        found.append(
            f"{where}: CUDA cannot start in a confined student process, so every GPU "
            f"grade would be a grader error: {answer['cuda']}"
        )
    if answer.get("writable"):
        found.append(
            f"{where}: the account that runs student code can write the code the jobs "
            f"run, e.g. {', '.join(answer['writable'][:3])}: make it another account's, "
            "read-only to this one (docs: deploying, security)"
        )
    return found


def runs_as_the_submitter(answer: dict, submitter: str) -> list[str]:
    """A Slurm probe job that ran as the account that submitted it: student code would run with
    all that account reads, the service's settings (the database's password, the secret key)
    among them where the service submits its jobs itself."""
    if answer.get("user") != submitter:
        return []
    return [
        f"{answer.get('node')} as {submitter}: the jobs run as {submitter}, the account that "
        "submits them (this check's): submit them as the grading account, which reads nothing "
        "of the service's (SLURM_SUBMIT_HOST; docs: deploying, security)"
    ]
