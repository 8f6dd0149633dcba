"""A worker's heartbeat (worker/grading/heartbeat.py), from a real Celery worker on the demo's
broker: written while the worker takes messages, silent while it takes none (here it is stopped
by a signal, then its pool process is: the main process would answer on, its tasks would not
run), told to systemd's watchdog (NOTIFY_SOCKET, as systemd gives it), and gone when the worker
stops on purpose."""

import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import descendants

from server.core.db import Database
from server.core.models import WorkerHeartbeat
from worker.cli.demo import write_config

ROOT = Path(__file__).parents[2]
NODE = "beating@test"


@pytest.fixture
def worker(tmp_path, migrated_sqlite):
    """A worker beating every 0.5 s, its systemd notifications on a socket of the test's."""
    shutil.copyfile(migrated_sqlite, tmp_path / "h.sqlite")
    broker = tmp_path / "broker"
    write_config(
        tmp_path / "h.toml",
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'h.sqlite'}",
            "SECRET_KEY": "x",
            "BROKER_URL": "filesystem://localhost/",
            "SPOOL_DIR": str(tmp_path / "spool"),
            "WORKER_HEARTBEAT_SECONDS": 0.5,
            "LOGIN_LIMITS_STORAGE": "memory://",
            "BROKER_TRANSPORT_OPTIONS": {
                "data_folder_in": str(broker / "messages"),
                "data_folder_out": str(broker / "messages"),
                "control_folder": str(broker / "control"),
                "polling_interval": 0.05,
            },
        },
    )
    for folder in ("messages", "control"):
        (broker / folder).mkdir(parents=True)
    notices = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notices.bind(str(tmp_path / "notify"))
    notices.settimeout(0.2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HPCGRADE_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery_app",
            "worker",
            "--concurrency",
            "1",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--hostname",
            NODE,
        ],
        cwd=ROOT,
        env=dict(
            env, HPCGRADE_CONFIG=str(tmp_path / "h.toml"), NOTIFY_SOCKET=str(tmp_path / "notify")
        ),
    )
    database = Database(f"sqlite:///{tmp_path / 'h.sqlite'}")
    yield process, notices, database
    process.kill()
    process.wait()
    database.dispose()
    notices.close()


def heard(notices: socket.socket, seconds: float, first: bool = False) -> list[bytes]:
    """What systemd would have been told in the next `seconds` (or, `first`, until told)."""
    told, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline and not (first and told):
        try:
            told.append(notices.recv(1024))
        except TimeoutError:
            pass
    return told


def heartbeat(database: Database):
    # a read takes no write lock: the worker may be stopped while it holds one
    with database.reads() as session:
        return session.scalar(sa.select(WorkerHeartbeat).where(WorkerHeartbeat.node == NODE))


def test_a_worker_beats_while_it_takes_messages_and_stops_when_it_cannot(worker):
    process, notices, database = worker
    deadline = time.monotonic() + 60
    while not heard(notices, 0.5, first=True):
        assert time.monotonic() < deadline and process.poll() is None
    assert heard(notices, 1.5).count(b"READY=1\nWATCHDOG=1") >= 2
    beat = heartbeat(database)
    assert beat.pid == process.pid and 0 < beat.round_trip < 2
    assert dt.datetime.now(dt.timezone.utc) - beat.beat_at < dt.timedelta(seconds=3)

    process.send_signal(signal.SIGSTOP)
    heard(notices, 0.5)  # a beat already on its way
    assert heard(notices, 1.5) == []
    before = heartbeat(database).beat_at
    process.send_signal(signal.SIGCONT)
    assert heard(notices, 3, first=True)
    deadline = time.monotonic() + 3  # written just after systemd is told
    while heartbeat(database).beat_at <= before:
        assert time.monotonic() < deadline
        time.sleep(0.05)

    (pool,) = descendants(process.pid, depth=1)  # its main process answers; its pool takes none
    os.kill(pool, signal.SIGSTOP)
    heard(notices, 0.5)
    assert heard(notices, 1.5) == []
    os.kill(pool, signal.SIGCONT)
    assert heard(notices, 3, first=True)

    process.send_signal(signal.SIGTERM)  # stopped on purpose: not missed
    assert process.wait(timeout=30) == 0
    assert heartbeat(database) is None
