"""An idle pilot's cost to the shared filesystem (issue 18, point 11): its metadata calls,
counted with strace, and how soon it still takes a run put in its inbox."""

import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from worker.harness import pilot as layout
from worker.harness import spool
from worker.harness.pilot import RECENT_SECONDS

ROOT = Path(__file__).parents[2]
# what reaches a shared filesystem's metadata server: lookups, opens, listings, renames
METADATA_CALLS = {
    "stat",
    "lstat",
    "fstatat64",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "open",
    "openat",
    "getdents",
    "getdents64",
    "rename",
    "renameat",
    "renameat2",
    "unlink",
    "unlinkat",
    "mkdir",
    "mkdirat",
}
PILOT = """
import sys
from worker.harness.pilot import Pilot
Pilot(sys.argv[1], "7", minutes=10).serve(lambda run: (run / "graded").touch())
"""


@pytest.fixture
def pilot(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", PILOT, str(tmp_path)], cwd=ROOT)
    deadline = time.monotonic() + 30
    while layout.read_heartbeat(layout.pilot_dir(tmp_path, "7")) is None:
        assert time.monotonic() < deadline and process.poll() is None, "the pilot did not start"
        time.sleep(0.05)
    yield process
    process.kill()
    process.wait()


def metadata_calls(pid: int, seconds: float) -> dict[str, int]:
    """System calls of every thread of a process over `seconds`, by name (strace -c)."""
    traced = subprocess.Popen(
        ["strace", "-f", "-c", "-p", str(pid)], stderr=subprocess.PIPE, text=True
    )
    time.sleep(seconds)
    traced.send_signal(signal.SIGINT)
    summary = traced.communicate(timeout=30)[1]
    calls = {}
    for line in summary.splitlines():
        fields = line.split()
        if len(fields) >= 5 and re.fullmatch(r"[\d.]+", fields[0]) and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    assert calls, summary
    return calls


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace is not installed")
def test_an_idle_pilot_makes_at_most_ten_metadata_calls_a_second(pilot):
    time.sleep(RECENT_SECONDS + 1)  # its inbox, just made, is listed until it is not recent
    calls = metadata_calls(pilot.pid, 5.0)
    metadata = sum(n for name, n in calls.items() if name in METADATA_CALLS)
    assert metadata / 5.0 <= 10, calls


def test_a_run_put_in_an_idle_pilots_inbox_is_graded_at_once(pilot, tmp_path):
    waits = []
    for run in range(10):
        folder = spool.run_dir(tmp_path, str(run))
        folder.mkdir(parents=True)
        time.sleep(0.37)  # idle a while, at a different moment of its ticks each time
        sent = time.monotonic()
        (layout.inbox(tmp_path, "7") / str(run)).touch()
        while not (folder / "graded").exists():
            assert time.monotonic() - sent < 5, "the pilot did not take the run"
            time.sleep(0.002)
        waits.append(time.monotonic() - sent)
    assert statistics.median(waits) < 0.12 and max(waits) < 0.25, waits
