"""The beat's collect tasks after the dispatcher was away (issue 18, point 9): those queued
meanwhile expire, and one collect runs at a time across the workers, so a restart does not
fire a burst of squeue calls; on the demo's folder broker, with SQLite, and the real Slurm of
scripts/slurm (a `squeue` first on PATH logs each call)."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import slurm_cluster
from helpers import REFERENCE_Q, end_process, queue_submission, the_course

from server.core import migrate
from server.core.config import app_settings, load_settings
from server.core.db import Database
from server.core.exercises import sync_exercises
from server.core.users import add_user
from worker.cli.demo import demo_settings, write_config
from worker.grading.dispatch import Dispatcher
from worker.grading.one_at_a_time import one_at_a_time
from worker.grading.slurm import SlurmExecutor

ROOT = Path(__file__).parents[2]


def test_one_holder_at_a_time_and_the_lock_is_free_again_after(database, tmp_path):
    with one_at_a_time(database, tmp_path, "collect") as first:
        with one_at_a_time(database, tmp_path, "collect") as second:
            assert (first, second) == (True, False)
        with one_at_a_time(database, tmp_path, "other") as other:
            assert other
    with one_at_a_time(database, tmp_path, "collect") as again:
        assert again


def test_on_a_cluster_a_dispatch_leaves_the_work_to_one_under_way(tmp_path, monkeypatch):
    """A rush queues a dispatch message per submission; on a cluster the first claims all that
    is due, and the others return at once instead of each redoing its work while the collects
    wait behind them."""
    from server.web.app import create_app
    from worker.grading import dispatch as dispatch_module
    from worker.grading import tasks

    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
            "SECRET_KEY": "t",
            "BROKER_URL": "memory://",
            "EXECUTOR": "slurm",
            "SPOOL_DIR": str(tmp_path / "spool"),
        }
    )
    migrate.upgrade(app_settings(app).database_url)
    monkeypatch.setattr(tasks, "_executor", [])  # this test's Slurm executor, not a cached one
    dispatched = []
    monkeypatch.setattr(
        Dispatcher,
        "dispatch",
        lambda self: dispatched.append("dispatched") or dispatch_module.Dispatched(),
    )
    monkeypatch.setattr(Dispatcher, "recover", lambda self, dead: [])
    with app.app_context():
        with one_at_a_time(app.extensions["hpcgrade.db"], tmp_path / "spool", "dispatch"):
            assert tasks.dispatch.apply(args=[[1]]).get() == {}
            assert tasks.collect.apply().get() == {}
        # the collect's alone: the dispatch turned away waits for it at most
        assert dispatched == ["dispatched"]
        tasks.dispatch.apply(args=[[2]]).get()
    assert dispatched == ["dispatched", "dispatched"]


def celery(command: str, env: dict, *options: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery_app",
            command,
            "-l",
            "warning",
            *options,
        ],
        cwd=ROOT,
        env=env,
    )


def stop(process: subprocess.Popen) -> None:
    end_process(process)


@pytest.mark.slurm
@pytest.mark.skipif(
    not slurm_cluster.available(), reason="no Slurm cluster of scripts/slurm's here"
)
def test_collects_queued_while_no_worker_ran_make_a_couple_of_squeue_calls(tmp_path, catalogue):
    folder = Path(tempfile.mkdtemp(prefix="hpcgrade-backlog-", dir="/var/tmp"))
    folder.chmod(0o755)
    course = f"t{uuid.uuid4().hex[:8]}"
    try:
        settings = {
            **demo_settings(folder, "slurm"),
            "COLLECT_SECONDS": 0.5,
            "COURSE": course,
            "SLURM_BATCH_WAIT": 0,
            "SLURM_PARTITION": os.environ.get("HPCGRADE_TEST_SLURM_PARTITION", "grading"),
            "SLURM_GPUS": 0,
            "SLURM_CPUS": 1,
            "SLURM_MEMORY": "1G",
            "SLURM_TIME": 5,
            "SLURM_EXTRA": ["--hold"],
        }  # its job waits: every collect polls it
        for key in ("data_folder_in", "control_folder"):
            Path(settings["BROKER_TRANSPORT_OPTIONS"][key]).mkdir(parents=True, exist_ok=True)
        migrate.upgrade(settings["DATABASE_URL"])
        database = Database(settings["DATABASE_URL"])
        with database.sessions.begin() as session:
            sync_exercises(session, the_course(session), catalogue)
            add_user(session, "ana", "Ana", "a@uni.es", "student", "long-password")
        config = load_settings(settings)
        queue_submission(database, REFERENCE_Q)
        Dispatcher.from_settings(database, SlurmExecutor(config), config).dispatch()
        write_config(folder / "hpcgrade.toml", settings)
        log, wrapper = folder / "squeue.log", folder / "bin" / "squeue"
        wrapper.parent.mkdir()
        wrapper.write_text(f'#!/bin/sh\necho "$*" >>{log}\nexec {shutil.which("squeue")} "$@"\n')
        wrapper.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
        env.update(
            HPCGRADE_CONFIG=str(folder / "hpcgrade.toml"),
            PATH=f"{wrapper.parent}:{os.environ['PATH']}",
        )

        # the dispatcher is away: a collect queues up every 0.5 s (beat starts slowly on a
        # loaded machine, so its queue is counted rather than a time waited)
        beat = celery("beat", env, "--schedule", str(folder / "beat"))
        inbox, deadline = (
            Path(settings["BROKER_TRANSPORT_OPTIONS"]["data_folder_in"]),
            time.monotonic() + 120,
        )
        while len(list(inbox.iterdir())) < 6:
            assert time.monotonic() < deadline, "beat queued fewer than 6 collects in 120 s"
            time.sleep(0.2)
        stop(beat)
        queued = len(list(inbox.iterdir()))
        time.sleep(1)
        worker = celery("worker", env, "--concurrency=2", "--without-gossip", "--without-mingle")
        try:
            deadline = time.monotonic() + 60
            while any(Path(settings["BROKER_TRANSPORT_OPTIONS"]["data_folder_in"]).iterdir()):
                assert time.monotonic() < deadline, "the worker did not drain its queue"
                time.sleep(0.2)
            time.sleep(3)
        finally:
            stop(worker)
        calls = log.read_text().splitlines() if log.exists() else []
        assert len(calls) <= 2, f"{len(calls)} squeue calls for {queued} queued tasks"
        database.dispose()
    finally:
        subprocess.run(["scancel", f"--name=hpcgrade-{course}"], check=True)
        shutil.rmtree(folder, ignore_errors=True)
