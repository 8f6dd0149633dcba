"""The service's side of the pilots (see worker/harness/pilot.py): which are alive, who gets a run.

A pilot is alive while its heartbeat is fresh and it takes runs until its allocation nears its
end. A pilot belongs to a course: `hpcgrade pilot start --course SLUG` starts it with the
course's python and Slurm options and writes SPOOL/pilots/<name>/course.json (the course and its
python), and it takes runs of that course alone. The dispatcher gives a shape's runs to the
least busy live pilot of its course that fits it, and grades the rest with sbatch. A pilot that falls silent is taken for dead, and its runs without a report
are dispatched again.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from server.core.config import Resources
from worker.grading.executor import JobState
from worker.grading.shapes import Shape
from worker.harness import pilot as layout
from worker.harness import spool
from worker.harness.jobs import Job, Limits
from worker.harness.runner import ANSWER_MARGIN_SECONDS

SILENT_SECONDS = 15.0  # a heartbeat this old: the pilot is dead or hung
COURSE_FILE = "course.json"


class Pilots:
    def __init__(self, spool: Path):
        self.spool = spool

    def heartbeats(self) -> dict[str, dict]:
        """name → heartbeat of every pilot that left one in the spool."""
        return layout.heartbeats(self.spool)

    @staticmethod
    def alive(beat: dict | None, now: float | None = None) -> bool:
        now = now or time.time()
        return beat is not None and now - float(beat.get("beat", 0)) < SILENT_SECONDS

    def choose(self, shape: Shape) -> str | None:
        """The least busy live pilot of the shape's course (and python) that can grade runs of
        this shape, or None."""
        now = time.time()
        fitting = [
            name
            for name, beat in self.heartbeats().items()
            if self.alive(beat, now)
            and not beat.get("stopping")
            and not (layout.pilot_dir(self.spool, name) / "stop").exists()
            and float(beat.get("until", 0)) > now
            and _fits(beat, shape)
            and self.course_of(name) == {"course": shape.course, "python": shape.python}
        ]
        return min(fitting, key=self._load, default=None)

    def belong(self, name: str, shape: Shape) -> None:
        """The pilot `name` (its Slurm job id) is the shape's course's: it takes that course's
        runs alone. Written as soon as sbatch answers; until then, it takes none."""
        folder = spool.make_folder(self.spool, "pilots", name)
        spool.write_atomically(
            folder / COURSE_FILE,
            json.dumps({"course": shape.course, "python": shape.python}).encode(),
        )

    def course_of(self, name: str) -> dict | None:
        """{"course": slug, "python": its python or None}; None for a pilot of no course."""
        try:
            return json.loads((layout.pilot_dir(self.spool, name) / COURSE_FILE).read_text())
        except (OSError, ValueError):
            return None

    def _load(self, name: str) -> int:
        return len(os.listdir(layout.inbox(self.spool, name)))

    def assign(self, name: str, jobs: list[Job]) -> list[str]:
        """Put the runs in the pilot's inbox; their external id is the pilot's Slurm job id."""
        for job in jobs:
            (layout.inbox(self.spool, name) / job.id).touch()
        return [name] * len(jobs)

    def node(self, name: str) -> str | None:
        return (layout.read_heartbeat(layout.pilot_dir(self.spool, name)) or {}).get("node")

    def check(self, name: str, state: JobState) -> JobState:
        """Slurm's word on a pilot's job, unless the pilot fell silent while Slurm says it runs,
        or its heartbeat says it has held one run longer than that run may take (its harness
        stopped answering: STUCK, and collect cancels its job). A pilot seen ended, silent or
        stuck gets no more runs, whatever its last heartbeat says."""
        beat = layout.read_heartbeat(layout.pilot_dir(self.spool, name))
        if state.outcome == "waiting" and not self.alive(beat):
            state = JobState("SILENT", state.node, "no heartbeat")
        elif state.outcome == "waiting" and (held := self._held_too_long(beat)):
            state = JobState("STUCK", state.node, f"run {beat['grading']} held {held:.0f} s")
        if state.outcome != "waiting":
            self.stop(name)
        return state

    def _held_too_long(self, beat: dict) -> float | None:
        """Seconds the pilot has graded its run for, if that is longer than the run may take
        (spool.run_seconds, and the margin a harness is given to answer)."""
        run, since = beat.get("grading"), beat.get("grading_since")
        if not run or not isinstance(since, (int, float)):
            return None
        try:
            limits = Limits.from_dict(spool.read_job(spool.run_dir(self.spool, str(run))).limits)
        except (spool.UnreadableRun, ValueError, TypeError):
            limits = Limits()
        held = time.time() - since
        return held if held > spool.run_seconds(limits) + ANSWER_MARGIN_SECONDS else None

    def stop(self, name: str) -> bool:
        """Ask the pilot to stop; False if it has left no heartbeat yet (not started: it cannot
        read the request; its folder may hold its course alone)."""
        folder = layout.pilot_dir(self.spool, name)
        if layout.read_heartbeat(folder) is None:
            return False
        (folder / "stop").touch()
        return True


def _fits(beat: dict, resources: Resources) -> bool:
    if resources.partition and beat.get("partition") not in (None, resources.partition):
        return False
    memory = int(beat.get("memory") or 0)
    return int(beat.get("gpus") or 0) >= resources.gpus and (
        memory == 0 or memory >= resources.memory
    )
