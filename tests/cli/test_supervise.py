"""The demo's supervisor (worker/cli/supervise.py) on processes of the test's own: one killed
starts again after a second however often, one that keeps exiting at its start waits longer
each time, one whose sign of life stopped is replaced, and the log says why; a supervisor killed
takes its processes with it."""

import datetime as dt
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import alive
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from server.core.db import Database
from server.core.models import utcnow
from worker.cli.demo import signs_database
from worker.cli.supervise import Supervisor, Watch

ROOT = Path(__file__).parents[2]


def watched(supervisor: Supervisor, seconds: float, until=lambda: False) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not until():
        supervisor.check()
        time.sleep(0.05)


def test_one_killed_starts_again_at_once_however_often(tmp_path):
    said = []
    supervisor = Supervisor(dict(os.environ), str(tmp_path), said.append)
    first = supervisor.start("sleeper", ["sleep", "60"])
    try:
        for _ in range(3):
            before = supervisor.children["sleeper"].process
            os.kill(before.pid, signal.SIGKILL)
            watched(
                supervisor,
                5,
                lambda before=before: supervisor.children["sleeper"].process is not before,
            )
            assert supervisor.children["sleeper"].process is not before
        assert (
            said
            == ["the sleeper was killed by signal SIGKILL after 0 s; it starts again in 1 s"] * 3
        )
        assert not alive(first.pid)
    finally:
        supervisor.stop(grace=1)


def test_one_that_exits_at_its_start_waits_longer_each_time(tmp_path):
    said = []
    supervisor = Supervisor(dict(os.environ), str(tmp_path), said.append)
    supervisor.start("quitter", ["sh", "-c", "exit 3"])
    watched(supervisor, 4, lambda: len(said) >= 2)
    supervisor.stop(grace=1)
    assert said == [
        "the quitter exited with status 3 after 0 s; it starts again in 2 s",
        "the quitter exited with status 3 after 0 s; it starts again in 4 s",
    ]


def test_a_supervisor_killed_takes_its_processes_with_it(tmp_path):
    script = (
        "import os, sys, time\n"
        "from worker.cli.supervise import Supervisor\n"
        "s = Supervisor(dict(os.environ), '.', print)\n"
        "print(s.start('sleeper', ['sleep', '60']).pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_one_whose_sign_of_life_stopped_is_replaced_and_a_locked_database_blames_no_one(tmp_path):
    """A worker's heartbeat or beat's reconcile, read from the database: silent too long, the
    process is replaced and the log says what the silence means; a database that cannot be
    read (locked by an operator's sqlite3 shell) replaces nothing, and is said once."""
    said, last = [], {"sign": None}

    def sign(_session):
        if isinstance(last["sign"], Exception):
            raise last["sign"]
        return last["sign"]

    database = Database(f"sqlite:///{tmp_path / 'signs.sqlite'}")
    supervisor = Supervisor(dict(os.environ), str(tmp_path), said.append, database)
    supervisor.watches.append(Watch("sleeper", sign, 5.0, "gave no sign"))
    first = supervisor.start("sleeper", ["sleep", "60"])
    try:
        last["sign"] = OperationalError("SELECT", {}, Exception("database is locked"))
        watched(supervisor, 0.3)
        assert said == [
            "cannot read the processes' signs of life (database is locked); they "
            "are left as they are"
        ]
        last["sign"] = utcnow()
        watched(supervisor, 0.3)
        assert supervisor.children["sleeper"].process is first
        supervisor.children["sleeper"].started_at -= dt.timedelta(seconds=60)  # beat on, then
        last["sign"] = utcnow() - dt.timedelta(seconds=9)  # fell silent
        watched(supervisor, 0.3)
        assert supervisor.children["sleeper"].process is not first and not alive(first.pid)
        assert said[1] == "the sleeper gave no sign for 9 s; it is stopped and started again"
    finally:
        supervisor.stop(grace=1)
        database.dispose()


HEARTBEAT = """
import sqlite3, sys
connection = sqlite3.connect(sys.argv[1])
connection.execute("PRAGMA journal_mode=WAL")
connection.execute("CREATE TABLE IF NOT EXISTS beats (at REAL)")
connection.execute("INSERT INTO beats VALUES (1)")
connection.commit()
connection.close()
"""


def test_no_worker_of_the_demo_closes_the_databases_last_connection(tmp_path):
    """The last connection to close takes the database to itself while it folds the WAL back
    in: a worker stopped there (SIGSTOP) locked the demo's supervisor out of the heartbeats that
    would have it replaced. The supervisor's connection stays open, so a worker's heartbeat
    (a connection opened, written to and closed) is never the last: the WAL stays."""
    path = tmp_path / "demo.sqlite"
    database = signs_database(f"sqlite:///{path}")
    try:
        beat = [sys.executable, "-c", HEARTBEAT, str(path)]
        subprocess.run(beat, check=True, timeout=60)
        with database.reads() as session:  # a round of the supervisor's
            session.execute(text("SELECT count(*) FROM beats"))
        subprocess.run(beat, check=True, timeout=60)
        assert Path(f"{path}-wal").exists()
    finally:
        database.dispose()
