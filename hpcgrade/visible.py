"""An exercise's visible checks, run on a student's file by the grader's own harness, on the
student's machine: no server needed to grade, no attempt used.

The exercise's public files come from the local exercises folder when it has them (an
instructor, a checkout), otherwise from the service (`GET /api/v1/exercises/SLUG/files`), into a
folder of this run's own.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from server.core.catalogue import (PUBLIC_FILES, SLUG, ExerciseConfigError, default_root,
                              load_exercise_info)
from worker.harness.jobs import VISIBLE_CHECKS, Job
from worker.harness.runner import HarnessProcess

from hpcgrade.service import Service


def run_visible_checks(slug: str, file: Path, lang: str = "en",
                       service: Service | None = None) -> dict:
    """The report of the visible checks on `file` (a .py or .ipynb), as `hpcgrade grade --json`
    gives one. Raises ServiceError when the exercise must be fetched and cannot be, ValueError
    for an unknown exercise, HarnessFailed when the harness itself fails."""
    with tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as scratch:
        folder, limits = exercise_files(slug, Path(scratch) / slug, service)
        # the student's own code and public checks on the student's own machine: no layer is
        # required (a node without user namespaces still runs them), each is raised where it can be
        job = Job(exercise=slug, exercise_dir=str(folder), submission=str(file.resolve()),
                  filename=file.name, limits=limits, seed=0, lang=lang, checks=VISIBLE_CHECKS,
                  required_layers=())
        with HarnessProcess(scratch=scratch) as harness:
            return harness.report_for(job).to_dict()


def exercise_files(slug: str, fetched: Path, service: Service | None = None) -> tuple[Path, dict]:
    """The folder holding the exercise's public files (the local one, or `fetched`, where they
    are written from the service), and its limits."""
    if not SLUG.match(slug):
        raise ValueError(f"{slug!r} is not an exercise's name (like autograd-q)")
    local = default_root() / slug
    if (local / VISIBLE_CHECKS).is_file():
        try:
            return local, load_exercise_info(local).limits
        except ExerciseConfigError as exc:
            raise ValueError(str(exc)) from None
    published = (service or Service()).get(f"/api/v1/exercises/{slug}/files")
    files, limits = published.get("files"), published.get("limits")
    if not isinstance(files, dict) or not isinstance(limits, dict) \
            or not isinstance(files.get(VISIBLE_CHECKS), str):
        raise ValueError(f"the server sent no visible checks for {slug}")
    fetched.mkdir()
    for name in PUBLIC_FILES:
        if isinstance(files.get(name), str):
            (fetched / name).write_text(files[name])
    return fetched, limits
