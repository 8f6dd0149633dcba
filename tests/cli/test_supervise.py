"""The demo's supervisor (worker/cli/supervise.py) on processes of the test's own: one killed
starts again after a second however often, one that keeps exiting at its start waits longer
each time, and the log says why; a supervisor killed takes its processes with it."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import alive
from worker.cli.supervise import Supervisor

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
            watched(supervisor, 5, lambda: supervisor.children["sleeper"].process is not before)
            assert supervisor.children["sleeper"].process is not before
        assert said == ["the sleeper was killed by signal SIGKILL after 0 s; it starts again "
                        "in 1 s"] * 3
        assert not alive(first.pid)
    finally:
        supervisor.stop(grace=1)


def test_one_that_exits_at_its_start_waits_longer_each_time(tmp_path):
    said = []
    supervisor = Supervisor(dict(os.environ), str(tmp_path), said.append)
    supervisor.start("quitter", ["sh", "-c", "exit 3"])
    watched(supervisor, 4, lambda: len(said) >= 2)
    supervisor.stop(grace=1)
    assert said == ["the quitter exited with status 3 after 0 s; it starts again in 2 s",
                    "the quitter exited with status 3 after 0 s; it starts again in 4 s"]


def test_a_supervisor_killed_takes_its_processes_with_it(tmp_path):
    script = ("import os, sys, time\n"
              "from worker.cli.supervise import Supervisor\n"
              "s = Supervisor(dict(os.environ), '.', print)\n"
              "print(s.start('sleeper', ['sleep', '60']).pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=ROOT)
    child = int(parent.stdout.readline())
    assert alive(child)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)
