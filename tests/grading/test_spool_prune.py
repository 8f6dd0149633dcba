"""The spool pruned by age (issue 18, point 12): job logs, dead pilots' folders and runs' folders
left behind go SPOOL_KEEP_DAYS after their last change; a pilot whose allocation has not ended
and a run still running stay whatever their age. Beat runs it hourly, and names only tasks that
exist."""

import datetime as dt
import json
import os
import time
from pathlib import Path

import sqlalchemy as sa
from click.testing import CliRunner
from helpers import REFERENCE_Q, queue_submission

from server.core import runs
from server.core.models import WorkerHeartbeat, utcnow
from server.web.app import create_app
from worker.cli.main import main
from worker.harness import spool

DAY = 86400


def aged(path: Path, days: float) -> Path:
    """The path, last changed `days` ago."""
    when = time.time() - days * DAY
    os.utime(path, (when, when))
    return path


def job_log(root: Path, name: str, days: float) -> Path:
    path = spool.make_folder(root, "jobs") / name
    path.write_text("graded\n")
    return aged(path, days)


def pilot(root: Path, name: str, beat_days: float, until_days: float) -> Path:
    """A pilot's folder: its last heartbeat `beat_days` ago, its allocation's end `until_days`
    ago (negative: to come)."""
    folder = spool.make_folder(root, "pilots", name, "inbox").parent
    now = time.time()
    (folder / "heartbeat.json").write_text(
        json.dumps({"name": name, "beat": now - beat_days * DAY, "until": now - until_days * DAY})
    )
    return aged(folder, beat_days)


def run_folder(root: Path, name: str, days: float) -> Path:
    folder = spool.make_folder(root, "runs", name)
    (folder / "report.json").write_text("{}")
    return aged(folder, days)


def running_run(database) -> str:
    with database.sessions.begin() as session:
        claimed = runs.claim(
            session, queue_submission(database, REFERENCE_Q), "slurm", "w", dt.timedelta(minutes=15)
        )
    return str(claimed.run_id)


def test_old_logs_dead_pilots_and_runs_left_behind_go_the_rest_stays(database, tmp_path):
    root = tmp_path / "spool"
    old_log, new_log = job_log(root, "11.out", 15), job_log(root, "12.out", 13)
    dead = pilot(root, "20", beat_days=15, until_days=15)
    # silent for 15 days, but its allocation has not ended: its job may still run
    allocated = pilot(root, "21", beat_days=15, until_days=-1)
    live = pilot(root, "22", beat_days=0, until_days=-1)
    running = run_folder(root, running_run(database), 15)
    left_behind, recent = run_folder(root, "999999", 15), run_folder(root, "999998", 13)
    now = utcnow()
    with database.sessions.begin() as session:  # a worker gone two days, one beating now
        session.add_all(
            [
                WorkerHeartbeat(node=node, pid=1, started_at=at, beat_at=at, round_trip=0.01)
                for node, at in (("gone@a", now - dt.timedelta(days=2)), ("here@b", now))
            ]
        )
    app = create_app(
        {
            "DATABASE_URL": database.engine.url.render_as_string(False),
            "SECRET_KEY": "test",
            "SPOOL_DIR": str(root),
            "TESTING": True,
        }
    )
    from worker.grading import tasks

    with app.app_context():
        pruned = tasks.prune_spool()
    assert pruned == "removed 1 job log(s), 1 dead pilot folder(s), 1 run folder(s) left behind"
    assert [p.exists() for p in (old_log, dead, left_behind)] == [False] * 3
    assert all(p.exists() for p in (new_log, allocated, live, running, recent))
    with database.sessions() as session:
        assert session.scalars(sa.select(WorkerHeartbeat.node)).all() == ["here@b"]


def test_spool_keep_days_sets_the_age_and_the_command_prunes_by_hand(
    database, tmp_path, monkeypatch
):
    root = tmp_path / "spool"
    week_old, day_old = job_log(root, "11.out", 7), job_log(root, "12.out", 1)
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", database.engine.url.render_as_string(False))
    monkeypatch.setenv("HPCGRADE_SPOOL_DIR", str(root))
    monkeypatch.setenv("HPCGRADE_SPOOL_KEEP_DAYS", "5")
    pruned = CliRunner().invoke(main, ["slurm", "prune"])
    assert pruned.exit_code == 0, pruned.output
    assert pruned.output.startswith("removed 1 job log(s), 0 dead pilot folder(s)")
    assert (week_old.exists(), day_old.exists()) == (False, True)


def test_the_command_without_its_database_prunes_nothing_and_says_why(tmp_path, monkeypatch):
    root = tmp_path / "spool"
    week_old = job_log(root, "11.out", 7)
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("HPCGRADE_SPOOL_DIR", str(root))
    pruned = CliRunner().invoke(main, ["slurm", "prune"])
    assert pruned.exit_code == 1, pruned.output
    assert "cannot read the database" in pruned.output and "nothing pruned" in pruned.output
    assert week_old.exists()


def test_beat_schedules_the_prune_and_only_tasks_that_exist(app):
    # the worker imports them (worker/celery_app.py)
    from worker.grading import tasks  # noqa: F401

    celery = app.extensions["celery"]
    scheduled = {entry["task"] for entry in celery.conf.beat_schedule.values()}
    assert "hpcgrade.prune_spool" in scheduled and scheduled <= set(celery.tasks)
