"""How often, and how, the service calls Slurm (issue 18): squeue asked for the course's jobs
alone, one ssh connection reused for every command; on the real single-node Slurm of
scripts/slurm and its sshd. A `squeue` first on PATH logs each call, then runs the real one."""

import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
import slurm_cluster

from server.core.config import Settings, load_settings
from worker.grading.executor import JobState
from worker.grading.slurm import SlurmExecutor

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.skipif(
        not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
    ),
]


@pytest.fixture
def spool():
    """A short path: ssh's control socket must fit a socket's address (about 100 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-calls-", dir="/var/tmp")) / "spool"
    folder.mkdir()
    yield folder
    shutil.rmtree(folder.parent, ignore_errors=True)


def settings(spool: Path, **overrides) -> Settings:
    return load_settings(
        {
            "EXECUTOR": "slurm",
            "SPOOL_DIR": str(spool),
            "COURSE": f"t{uuid.uuid4().hex[:8]}",
            "COURSE_PYTHON": os.environ.get("HPCGRADE_TEST_COURSE_PYTHON", "python3"),
            "SLURM_PARTITION": os.environ.get("HPCGRADE_TEST_SLURM_PARTITION", "grading"),
            "SLURM_GPUS": 0,
            "SLURM_CPUS": 1,
            "SLURM_MEMORY": "1G",
            "SLURM_TIME": 5,
            **overrides,
        }
    )


def over_ssh(spool: Path, **overrides) -> Settings:
    return settings(
        spool,
        SLURM_SUBMIT_HOST=os.environ["HPCGRADE_TEST_SSH_HOST"],
        SLURM_SSH_OPTIONS=json.loads(os.environ["HPCGRADE_TEST_SSH_OPTIONS"]),
        **overrides,
    )


def master(config: Settings, spool: Path) -> str:
    """What `ssh -O check` says of the connection the commands would share."""
    checked = subprocess.run(
        [
            "ssh",
            *config.slurm_ssh_options,
            "-o",
            f"ControlPath={spool}/ssh/%C",
            "-O",
            "check",
            config.slurm_submit_host,
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return checked.stderr.strip() if checked.returncode == 0 else ""


def test_ssh_mode_reuses_one_connection_for_every_command(spool):
    config = over_ssh(spool)
    commands = SlurmExecutor(config).commands
    try:
        assert "slurm" in commands.run(["sinfo", "--version"])
        first = master(config, spool)
        assert first.startswith("Master running"), first
        assert "slurm" in commands.run(["squeue", "--version"])
        assert master(config, spool) == first  # the same master process served the second
    finally:
        subprocess.run(
            [
                "ssh",
                *config.slurm_ssh_options,
                "-o",
                f"ControlPath={spool}/ssh/%C",
                "-O",
                "exit",
                config.slurm_submit_host,
            ],
            capture_output=True,
            timeout=30,
        )


def test_ssh_options_of_the_settings_override_the_shared_connection(spool):
    config = over_ssh(spool)
    config = dataclasses.replace(
        config, slurm_ssh_options=(*config.slurm_ssh_options, "-o", "ControlMaster=no")
    )
    commands = SlurmExecutor(config).commands
    assert "slurm" in commands.run(["sinfo", "--version"])
    assert master(config, spool) == ""


@pytest.fixture
def squeue_calls(tmp_path, monkeypatch):
    """The arguments of every squeue call made from now on, one list a call."""
    log = tmp_path / "squeue.log"
    wrapper = tmp_path / "bin" / "squeue"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >>{log}\nexec {shutil.which("squeue")} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    return lambda: log.read_text().splitlines() if log.exists() else []


def held_job(name: str, spool: Path) -> str:
    return subprocess.run(
        [
            "sbatch",
            "--parsable",
            "--hold",
            f"--job-name={name}",
            "--mem=100M",
            f"--output={spool}/%j.out",
            "--wrap",
            "true",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_a_poll_asks_squeue_for_the_jobs_it_follows_alone(spool, squeue_calls):
    slurm = SlurmExecutor(settings(spool))
    mine, other = held_job(slurm.default.job_name, spool), held_job("someone-else", spool)
    try:
        for _ in range(3):
            assert slurm.poll([mine]) == {mine: JobState("PENDING", None, "JobHeldUser")}
        calls = squeue_calls()
        assert calls and all(f"--jobs={mine}" in call.split() for call in calls), calls
        # this Slurm (22.05) answers --json with the whole job table, whatever --jobs says:
        # it is asked in JSON once, then in text
        assert len(calls) <= 4 and all("--json" not in call for call in calls[-2:]), calls
    finally:
        subprocess.run(["scancel", mine, other], check=True)


def test_a_poll_of_jobs_squeue_has_forgotten_asks_sacct(spool, squeue_calls):
    slurm = SlurmExecutor(settings(spool))
    assert slurm.poll(["999999"]) == {"999999": JobState("VANISHED")}
