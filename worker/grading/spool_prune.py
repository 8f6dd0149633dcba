"""The spool pruned by age: what nothing reads any more leaves it SPOOL_KEEP_DAYS after its last
change (beat's hpcgrade.prune_spool, hourly; `hpcgrade slurm prune` by hand):

- job logs, SPOOL/jobs/<job id>.out, last written that long ago;
- dead pilots' folders, SPOOL/pilots/<job id>/: their last heartbeat and the end of their
  allocation that long ago (a pilot stops taking runs at that end and exits, so no pilot whose
  job may still run is removed);
- run folders, SPOOL/runs/<run id>/, left behind (a worker killed between reading a report and
  removing its folder, `hpcgrade grade --executor slurm` interrupted): last changed that long
  ago, and their run not running in the database.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Collection

from sqlalchemy import select

from server.core.config import Settings
from server.core.db import Database
from server.core.models import GradingRun, RunStatus
from worker.harness import pilot as layout
from worker.harness import spool

log = logging.getLogger(__name__)
DAY_SECONDS = 86400


@dataclass
class Pruned:
    logs: int = 0
    pilots: int = 0
    runs: int = 0

    def __str__(self) -> str:
        return (
            f"removed {self.logs} job log(s), {self.pilots} dead pilot folder(s), "
            f"{self.runs} run folder(s) left behind"
        )


def prune_spool(settings: Settings, database: Database) -> Pruned:
    """Prune the spool of these settings, keeping the folders of the runs the database says are
    running whatever their age."""
    with database.sessions() as session:
        running = {
            str(run_id)
            for run_id in session.scalars(
                select(GradingRun.id).where(GradingRun.status == RunStatus.running.value)
            )
        }
    return prune(Path(settings.spool_dir), settings.spool_keep_days, running)


def prune(
    root: Path, keep_days: float, running: Collection[str], now: float | None = None
) -> Pruned:
    before = (now or time.time()) - keep_days * DAY_SECONDS
    pruned = Pruned()
    for job_log in _entries(root / "jobs"):
        if job_log.suffix == ".out" and _changed(job_log) < before:
            pruned.logs += _remove(job_log)
    for folder in _entries(root / "pilots"):
        beat = layout.read_heartbeat(folder) or {}
        last = max(_changed(folder), float(beat.get("beat", 0)), float(beat.get("until", 0)))
        if last < before:
            pruned.pilots += _remove(folder)
    for folder in _entries(root / "runs"):
        if (
            spool.RUN_ID.fullmatch(folder.name)
            and folder.name not in running
            and _changed(folder) < before
        ):
            spool.remove_run(root, folder.name)
            pruned.runs += 1
    return pruned


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except FileNotFoundError:
        return []


def _changed(path: Path) -> float:
    """Its mtime (a folder's changes when an entry is added, renamed or removed); one that is
    gone counts as changed now."""
    try:
        return path.lstat().st_mtime
    except FileNotFoundError:
        return time.time()


def _remove(path: Path) -> int:
    """1 once it is gone, 0 if it cannot be removed (logged)."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("cannot prune %s: %s", path, exc)
        return 0
    return 1
