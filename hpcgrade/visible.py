"""An exercise's visible checks, run on a student's file by the grader's own harness, on the
student's machine: no server needed to grade, no attempt used.

The exercise's public files come from the local exercises folder when it has them (an
instructor, a checkout), otherwise from the service (`GET /api/v1/exercises/SLUG/files`), kept
in ~/.cache/hpcgrade/exercises/SLUG.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from server.catalogue import (PUBLIC_FILES, SLUG, ExerciseConfigError, default_root,
                              load_exercise_info)
from worker.harness.jobs import VISIBLE_CHECKS, Job
from worker.runner import HarnessProcess

from .service import Service


def run_visible_checks(slug: str, file: Path, lang: str = "en",
                       service: Service | None = None) -> dict:
    """The report of the visible checks on `file` (a .py or .ipynb), as `hpcgrade grade --json`
    gives one. Raises ServiceError when the exercise must be fetched and cannot be, ValueError
    for an unknown exercise, HarnessFailed when the harness itself fails."""
    folder, limits = exercise_files(slug, service)
    job = Job(exercise=slug, exercise_dir=str(folder), submission=str(file.resolve()),
              filename=file.name, limits=limits, seed=0, lang=lang, checks=VISIBLE_CHECKS)
    with tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as scratch, \
            HarnessProcess(scratch=scratch) as harness:
        return harness.grade(job)


def exercise_files(slug: str, service: Service | None = None) -> tuple[Path, dict]:
    """The folder holding the exercise's public files, and its limits."""
    if not SLUG.match(slug):
        raise ValueError(f"{slug!r} is not an exercise's name (like autograd-q)")
    local = default_root() / slug
    if (local / VISIBLE_CHECKS).is_file():
        try:
            return local, load_exercise_info(local).limits
        except ExerciseConfigError as exc:
            raise ValueError(str(exc)) from None
    published = (service or Service()).get(f"/api/v1/exercises/{slug}/files")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "hpcgrade" / "exercises" / slug
    folder.mkdir(parents=True, exist_ok=True)
    for name in PUBLIC_FILES:
        (folder / name).unlink(missing_ok=True)
        if name in published["files"]:
            (folder / name).write_text(published["files"][name])
    return folder, published["limits"]
