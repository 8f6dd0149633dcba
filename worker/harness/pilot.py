"""A pilot: a warm harness inside a Slurm allocation that grades runs as they arrive in the spool.

The service and a pilot talk through the spool only (a shared filesystem), so compute nodes need
no route to the service:

    SPOOL/pilots/<name>/heartbeat.json   rewritten every second: who it is, what it holds, until when
    SPOOL/pilots/<name>/inbox/<run_id>   the service assigns SPOOL/runs/<run_id> to this pilot
    SPOOL/pilots/<name>/stop             the service asks it to finish its inbox and exit (seen
                                         within LOOK_SECONDS)

<name> is the pilot's Slurm job id. It stops taking runs a minute before its allocation ends, so
the dispatcher sends nothing it could not finish.
"""

from __future__ import annotations

import json
import os
import platform
import threading
import time
from pathlib import Path
from typing import Callable

from worker.harness import spool

BEAT_SECONDS = 1.0
# An idle pilot stats its inbox folder this often and lists it only when it changed: on a shared
# filesystem every stat, open and listing is a call to the metadata server, and inotify does not
# see what other nodes write. Every LOOK_SECONDS it lists the inbox whatever the stat says and
# looks for the stop file. With the heartbeat (an open and a rename a second), under 10 metadata
# calls a second at idle (about 236 when it listed the inbox every 20 ms).
IDLE_SECONDS = 0.15
LOOK_SECONDS = 5.0
# a folder changed this recently may change again within the same tick of a coarse clock (1 s on
# some filesystems), leaving its mtime as it was: it is listed until its mtime is older
RECENT_SECONDS = 2.0
MARGIN_SECONDS = 60.0


def pilot_dir(root: Path | str, name: str) -> Path:
    return Path(root) / "pilots" / name


def inbox(root: Path | str, name: str) -> Path:
    return pilot_dir(root, name) / "inbox"


def read_heartbeat(folder: Path) -> dict | None:
    try:
        beat = json.loads((folder / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return None
    return beat if isinstance(beat, dict) else None


def heartbeats(root: Path | str) -> dict[str, dict]:
    """name → heartbeat of every pilot that left one in the spool."""
    folder = Path(root) / "pilots"
    if not folder.is_dir():
        return {}
    beats = {p.name: read_heartbeat(p) for p in folder.iterdir() if p.is_dir()}
    return {name: beat for name, beat in beats.items() if beat is not None}


def allocation() -> dict:
    """What this Slurm allocation holds, from the variables Slurm sets in the job."""
    gpus = os.environ.get("CUDA_VISIBLE_DEVICES") or os.environ.get("SLURM_JOB_GPUS") or ""
    return {
        "job": os.environ.get("SLURM_JOB_ID"),
        "node": platform.node(),
        "partition": os.environ.get("SLURM_JOB_PARTITION"),
        "gpus": len([g for g in gpus.split(",") if g.strip()]),
        "cpus": int(os.environ.get("SLURM_CPUS_PER_TASK") or os.cpu_count() or 1),
        "memory": int(os.environ.get("SLURM_MEM_PER_NODE") or 0),
    }


class Inbox:
    """The runs assigned to a pilot, listed only when the folder changed."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.listed: tuple[int, int, int] | None = None  # the folder's stat at the last listing

    def runs(self, look: bool = False) -> list[Path]:
        """Run files, oldest id first; none when the folder is as it was at the last listing
        (unless `look`). The stat comes before the listing: a run added after it changes it."""
        status = os.stat(self.folder)
        seen = (status.st_mtime_ns, status.st_size, status.st_ino)
        if seen == self.listed and not look and time.time() - status.st_mtime > RECENT_SECONDS:
            return []
        self.listed = seen
        return sorted(self.folder.iterdir(), key=lambda p: (len(p.name), p.name))


class Pilot:
    """Heartbeat in a thread (a long grade never silences it), grading in the caller's."""

    def __init__(self, root: Path | str, name: str, minutes: float):
        self.root, self.name = Path(root), name
        self.folder = pilot_dir(root, name)
        self.inbox = spool.make_folder(root, "pilots", name, "inbox")
        self.next_look = 0.0  # time.monotonic() of the next full look (inbox and stop file)
        started = time.time()
        self.state = {
            "name": name,
            **allocation(),
            "started": started,
            "until": started + minutes * 60 - MARGIN_SECONDS,
            "graded": 0,
            "grading": None,
            "grading_since": None,
            "stopping": False,
        }
        self._done, self._writing = threading.Event(), threading.Lock()
        self._beat()
        threading.Thread(target=self._beating, daemon=True).start()

    def _beat(self) -> None:
        with self._writing:  # the beating thread and the grading one
            temporary = self.folder / f".heartbeat.{os.getpid()}"
            # os.open, not open(): no fstat of the new file, a metadata call less a second
            written = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            try:
                os.write(written, json.dumps({**self.state, "beat": time.time()}).encode())
            finally:
                os.close(written)
            os.replace(temporary, self.folder / "heartbeat.json")

    def _beating(self) -> None:
        while not self._done.wait(BEAT_SECONDS):
            self._beat()

    def serve(self, grade_run: Callable[[Path], None]) -> None:
        """Grade what arrives until asked to stop or the allocation nears its end, then finish
        the inbox and exit. An exception (SystemExit on SIGTERM) ends it at once, and its last
        heartbeat says it is stopping."""
        inbox = Inbox(self.inbox)
        try:
            while True:
                look = self._time_to_look()
                assigned = inbox.runs(look=look or self.state["stopping"])
                for entry in assigned:
                    self.state["grading"], self.state["grading_since"] = entry.name, time.time()
                    grade_run(spool.run_dir(self.root, entry.name))
                    entry.unlink(missing_ok=True)
                    self.state["graded"] += 1
                    self.state["grading"] = self.state["grading_since"] = None
                    self._beat()
                if not self.state["stopping"] and (
                    (look and (self.folder / "stop").exists()) or time.time() >= self.state["until"]
                ):
                    self.state["stopping"] = True
                    self._beat()
                    continue  # what arrived meanwhile is finished first
                if self.state["stopping"] and not assigned:
                    return
                if not assigned:
                    time.sleep(IDLE_SECONDS)
        finally:
            self._done.set()
            self.state["stopping"] = True
            self._beat()

    def _time_to_look(self) -> bool:
        now = time.monotonic()
        if now < self.next_look:
            return False
        self.next_look = now + LOOK_SECONDS
        return True
