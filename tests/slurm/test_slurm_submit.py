"""Sending batches to a real single-node Slurm when sbatch is slow or refuses, or the spool is
full (issue 18): a wrapper named `sbatch`, first on PATH, slows or fails the real one on
purpose; the spool is a small tmpfs (mounted as root, so that the jobs see it too)."""

import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import slurm_cluster
import sqlalchemy as sa
from helpers import REFERENCE_Q, queue_submission
from test_slurm import (  # noqa: F401
    ROOT,
    SLOW,
    SLOW_LOADS,
    config_file,
    empty_database_url,
    exercise_with,
    exercises_folder,
    make_dispatcher,
    own_jobs,
    settings,
    settle,
    shared,
    student_reads,
)

from server.core.models import ClusterState, GradingRun, Submission, utcnow
from worker.grading import slurm

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.services,
    pytest.mark.skipif(
        not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
    ),
]
REAL_SBATCH = "/usr/bin/sbatch"


def sbatch_wrapper(monkeypatch, folder: Path, body: str) -> Path:
    """`sbatch` on PATH runs `body` (bash; "$@" are sbatch's arguments); each call is a line of
    the returned file."""
    folder.mkdir(exist_ok=True)
    calls = folder / "calls"
    wrapper = folder / "sbatch"
    wrapper.write_text(f"#!/bin/bash\necho call >> {calls}\n{body}\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    return calls


def course_jobs(course: str) -> list[str]:
    """Every job of the course Slurm still lists, ended or not."""
    return subprocess.run(
        ["squeue", "-h", "--states=all", f"--name=hpcgrade-{course}", "-o", "%i"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


@pytest.mark.parametrize("prints", [True, False], ids=["prints-its-id-late", "prints-nothing"])
def test_a_slow_sbatch_makes_one_job_and_its_id_is_kept(
    database, shared, tmp_path, monkeypatch, prints
):
    """sbatch makes the job, then answers past COMMAND_SECONDS: the id it printed is kept, or,
    when it printed none, the job is found by its batch's tag; the runs are not sent again."""
    monkeypatch.setattr(slurm, "COMMAND_SECONDS", 2)
    sbatch_wrapper(
        monkeypatch,
        tmp_path / "bin",
        f'{REAL_SBATCH} "$@" {"" if prints else "> /dev/null"}\nexec sleep 6',
    )
    config = settings(shared)
    grading = make_dispatcher(database, config)
    ids = [queue_submission(database, REFERENCE_Q) for _ in range(2)]
    grading.dispatch()
    monkeypatch.undo()  # sbatch answers in time again
    done = settle(grading, ids, seconds=120)
    assert [(s.status, s.score, len(s.runs)) for s in done.values()] == [("graded", 10, 1)] * 2
    # a job each (their time limit holds one run at autograd-q's budget): no job more
    assert sorted(course_jobs(config.course)) == sorted(
        s.runs[0].external_id for s in done.values()
    )


@pytest.fixture
def cpu_load():
    """Every core kept busy, as beside other work: the second job came only then."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(os.cpu_count() or 2)
    ]
    yield
    for spinner in spinners:
        spinner.kill()
        spinner.wait()


def test_a_job_the_controller_makes_after_sbatch_was_stopped_is_the_only_job(
    database, shared, tmp_path, monkeypatch, cpu_load
):
    """sbatch stopped at COMMAND_SECONDS having printed nothing, its request still with the
    controller, which makes the job 3 s later, after a first look-up of the batch's tag: the
    job is looked for again and kept, and its runs are graded once, in it alone."""
    monkeypatch.setattr(slurm, "COMMAND_SECONDS", 2)
    sbatch_wrapper(
        monkeypatch,
        tmp_path / "bin",
        f'script=$(cat)\n( sleep 3; printf "%s\\n" "$script" | {REAL_SBATCH} "$@" '
        f"> /dev/null ) &\nexec sleep 30",
    )
    config = settings(shared)
    grading = make_dispatcher(database, config)
    submission_id = queue_submission(database, REFERENCE_Q)
    grading.dispatch()
    monkeypatch.undo()
    done = settle(grading, [submission_id], seconds=120)
    assert (
        done[submission_id].status,
        done[submission_id].score,
        len(done[submission_id].runs),
    ) == ("graded", 10, 1)
    assert course_jobs(config.course) == [done[submission_id].runs[0].external_id]


def test_a_permanent_sbatch_error_is_a_grader_error_naming_it(
    database, shared, tmp_path, monkeypatch
):
    calls = sbatch_wrapper(monkeypatch, tmp_path / "bin", f'exec {REAL_SBATCH} "$@"')
    catalogue = exercise_with(
        "autograd-q", slurm={"gpus": 0, "extra": ["--constraint=nonexistent"]}
    )
    grading = make_dispatcher(database, settings(shared), catalogue)
    submission_id = queue_submission(database, REFERENCE_Q)
    for _ in range(3):
        grading.collect()
        grading.dispatch()
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.score) == ("error", None)
        assert "Invalid feature specification" in submission.runs[0].error
    assert len(calls.read_text().splitlines()) == 1


def test_a_transient_sbatch_error_backs_off_and_the_runs_stay_queued(
    database, shared, tmp_path, monkeypatch
):
    calls = sbatch_wrapper(
        monkeypatch,
        tmp_path / "bin",
        "echo 'sbatch: error: Batch job submission failed: Socket timed out "
        "on send/recv operation' >&2\nexit 1",
    )
    grading = make_dispatcher(database, settings(shared))
    submission_id = queue_submission(database, REFERENCE_Q)
    for _ in range(5):
        grading.dispatch()
        time.sleep(0.2)
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.runs) == ("queued", [])
    assert len(calls.read_text().splitlines()) == 1  # backing off: not tried again at once
    seen, _runs = student_reads(database, submission_id)
    assert seen["held_by"] == "cluster_resting" and seen["queue_position"] == 1, seen
    with database.sessions() as session:  # every dispatcher rests, told by the database
        state = session.get(ClusterState, "slurm")
        assert state.failures == 1 and "Socket timed out" in state.reason
    assert make_dispatcher(database, settings(shared)).dispatch().due_in > 0
    assert len(calls.read_text().splitlines()) == 1
    monkeypatch.undo()
    with database.sessions.begin() as session:  # the rest over: the cluster takes jobs again
        session.get(ClusterState, "slurm").resting_until = utcnow()
    done = settle(grading, [submission_id])
    assert (done[submission_id].status, done[submission_id].score) == ("graded", 10)
    with database.sessions() as session:
        assert session.get(ClusterState, "slurm").failures == 0


def test_slurm_check_tries_every_exercises_shape_with_sbatch_test_only(database, shared, tmp_path):
    config = own_jobs(database, settings(shared))
    env = dict(
        os.environ,
        HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", config)),
        HPCGRADE_EXERCISES=str(
            exercises_folder(shared, "autograd-q", 'gpus = 0\nextra = ["--constraint=nonexistent"]')
        ),
    )
    checked = subprocess.run(
        [sys.executable, "-m", "worker.cli", "slurm", "check", "--no-probe"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert checked.returncode == 1
    assert "course pytorch, exercise autograd-q: sbatch refuses it" in checked.stderr
    assert "Invalid feature specification" in checked.stderr


@pytest.fixture
def small_spool(shared):
    """The spool on a 4 MB tmpfs: its free space is the test's to set."""
    spool = shared / "spool"
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=2770", "hpcgrade-test-spool", str(spool)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    shutil.chown(spool, group=os.environ.get("HPCGRADE_TEST_USER", "root"))
    yield spool
    slurm_cluster.cancel_all()  # no job left writing there
    subprocess.run(["umount", "--lazy", str(spool)], check=True)


def test_a_full_spool_sends_nothing_until_space_is_made(
    database, shared, small_spool, tmp_path, caplog
):
    filler = small_spool / "filler"
    filler.write_bytes(b"x" * (7 * 2**19))  # 3.5 of 4 MB: room for a run, not for SPOOL_MIN_FREE_MB
    config = settings(shared, SPOOL_MIN_FREE_MB=1)
    grading = make_dispatcher(database, config)
    submission_id = queue_submission(database, REFERENCE_Q)
    with caplog.at_level(logging.WARNING, logger="server.core.conditions"):
        grading.dispatch()
        grading.dispatch()  # said once, when it begins
    with database.sessions() as session:
        submission = session.get(Submission, submission_id)
        assert (submission.status, submission.runs) == ("queued", [])  # no try used
    assert course_jobs(config.course) == []
    seen, _runs = student_reads(database, submission_id)
    assert seen["held_by"] == "spool_full" and "disk is full" in seen["note"]
    began = f"spool_full began: 0 MB free on {small_spool}, SPOOL_MIN_FREE_MB is 1"
    assert caplog.text.count(began) == 1
    env = dict(
        os.environ,
        HPCGRADE_CONFIG=str(config_file(tmp_path / "h.toml", own_jobs(database, config))),
        HPCGRADE_EXERCISES=str(exercises_folder(shared, "autograd-q", "gpus = 0")),
    )
    checked = subprocess.run(
        [sys.executable, "-m", "worker.cli", "slurm", "check", "--no-probe"],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert checked.returncode == 1
    assert f"spool {small_spool}: holds 3 MB, 0 MB free" in checked.stdout
    assert f"is full: 0 MB free on {small_spool}, SPOOL_MIN_FREE_MB is 1" in checked.stderr
    filler.unlink()  # space made: the next cycle sends it
    done = settle(grading, [submission_id])
    assert [(s.status, s.score, len(s.runs)) for s in done.values()] == [("graded", 10, 1)]


def fill(spool: Path) -> Path:
    """Every byte of the spool's filesystem taken: a file grown until the disk refuses."""
    filler = spool / "filler"
    with open(filler, "wb", buffering=0) as f, contextlib.suppress(OSError):  # ENOSPC: full
        while True:
            f.write(b"x" * 4096)
    return filler


def test_a_spool_that_fills_while_a_job_runs_uses_no_try(database, shared, small_spool, caplog):
    """The spool's filesystem full while a job runs (issue 40): the job cannot write its report
    and ends; collect goes on polling Slurm meanwhile, says once that the spool is full, and the
    run goes back unused (it once used a try, and collect stopped on ENOSPC writing .polled-at);
    once there is room the submission is graded at its first counted try."""
    grading = make_dispatcher(
        database,
        settings(shared, SPOOL_MIN_FREE_MB=1),
        exercise_with("autograd-q", limits=SLOW_LOADS),
    )
    submission_id = queue_submission(database, SLOW.format(seconds=8))
    grading.dispatch()
    with database.sessions() as session:
        job = session.scalar(sa.select(GradingRun.external_id))
    settle(grading, [submission_id], until=lambda s: slurm_cluster.job_state(job) == "RUNNING")
    filler = fill(small_spool)
    with caplog.at_level(logging.WARNING):
        settle(
            grading,
            [submission_id],
            until=lambda s: s[0].status == "queued" and slurm_cluster.job_state(job) != "RUNNING",
        )
    seen, runs = student_reads(database, submission_id)
    assert (seen["held_by"], runs) == ("spool_full", [])  # queued (settle's), no try used
    assert "disk is full" in seen["note"]
    assert "run 1 goes back to the queue unused: job" in caplog.text
    assert caplog.text.count("spool_full began") == 1, caplog.text
    filler.unlink()
    done = settle(grading, [submission_id])
    assert [(s.status, s.score, len(s.runs)) for s in done.values()] == [("graded", 10, 1)]
