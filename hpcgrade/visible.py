"""An exercise's visible checks, run on a student's file by the grader's own harness, on the
student's machine: no server needed to grade, no attempt used.

The exercise's public files come from the local exercises folder when it has them and no course
is named (an instructor, a checkout), otherwise from the service (`GET
/api/v1/exercises/SLUG/files?course=COURSE`), into a folder of this run's own.
"""

from __future__ import annotations

import json
import tempfile
import warnings
from pathlib import Path

from hpcgrade.service import IN_JUPYTER, REFUSED, Advice, Service, ServiceError
from hpcgrade.summary import DOES_NOT_COMPILE
from server.core.catalogue import (
    CHECK_FILES,
    SLUG,
    ExerciseConfigError,
    default_root,
    load_exercise_info,
)
from worker.harness import visible_mistakes
from worker.harness.jobs import VISIBLE_CHECKS, Job
from worker.harness.runner import HarnessProcess
from worker.harness.submission import Unreadable, read


def run_visible_checks(
    slug: str,
    file: Path,
    lang: str = "en",
    course: str | None = None,
    advice: Advice = IN_JUPYTER,
    submitted: Path | None = None,
) -> dict:
    """The report of the visible checks on `file` (a .py or .ipynb), as `hpcgrade grade --json`
    gives one; `course`: the exercise's, where it is in several of the user's courses;
    `submitted`: the file `submit` would send (`file`, or in Jupyter the saved notebook), whose
    cells that do not compile are notes of the report.
    Raises ServiceError when the exercise must be fetched and cannot be (`advice`: in the words
    of where the client runs), ValueError for an unknown exercise, HarnessFailed when the
    harness itself fails."""
    with tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as scratch:
        folder, limits = exercise_files(slug, Path(scratch) / slug, course, advice)
        # the student's own code and public checks on the student's own machine: no layer is
        # required (a node without user namespaces still runs them), each is raised where it can be
        job = Job(
            exercise=slug,
            exercise_dir=str(folder),
            submission=str(file.resolve()),
            filename=file.name,
            limits=limits,
            seed=0,
            lang=lang,
            checks=VISIBLE_CHECKS,
            required_layers=(),
        )
        with HarnessProcess(scratch=scratch) as harness:
            report = harness.report_for(job).to_dict()
        try:
            cells = read(file.read_bytes(), file.name, 1 << 30).cells
        except (OSError, Unreadable):
            cells = ()
        report = visible_mistakes.recognised(report, _mistakes(folder), lang, cells)
    if submitted is not None and report.get("status") == "graded":
        report["notes"] = [*report.get("notes", []), *not_compiling(submitted)]
    return report


def _mistakes(folder: Path) -> dict:
    """The known wrong programs' failures of the visible checks, as the exercise's
    visible_mistakes.json holds them; none where it is missing or unreadable."""
    try:
        mistakes = json.loads((folder / visible_mistakes.FILE).read_text())
    except (OSError, ValueError):
        return {}
    return (
        mistakes
        if isinstance(mistakes, dict)
        and all(
            isinstance(m, dict)
            and isinstance(m.get("says"), dict)
            and isinstance(m.get("marks"), dict)
            for m in mistakes.values()
        )
        else {}
    )


def exercise_files(
    slug: str, fetched: Path, course: str | None = None, advice: Advice = IN_JUPYTER
) -> tuple[Path, dict]:
    """The folder holding the exercise's public files (the local one, or `fetched`, where they
    are written from the service), and its limits."""
    if not SLUG.match(slug):
        raise ValueError(f"{slug!r} is not an exercise's name (like autograd-q)")
    if course is not None and not SLUG.match(course):
        raise ValueError(f"{course!r} is not a course's name (like pytorch)")
    local = default_root() / slug
    # the local folder is one course's: a course named is the server's to say
    if course is None and (local / VISIBLE_CHECKS).is_file():
        try:
            return local, load_exercise_info(local).limits
        except ExerciseConfigError as exc:
            raise ValueError(str(exc)) from None
    try:
        published = Service(advice=advice).get(
            f"/api/v1/exercises/{slug}/files", **({"course": course} if course else {})
        )
    except ServiceError as exc:  # a refusal that does not say which exercise it is about
        if exc.kind != REFUSED or slug in str(exc):
            raise
        raise ServiceError(f"{course + '/' if course else ''}{slug}: {exc}", exc.kind) from None
    files, limits = published.get("files"), published.get("limits")
    if (
        not isinstance(files, dict)
        or not isinstance(limits, dict)
        or not isinstance(files.get(VISIBLE_CHECKS), str)
    ):
        raise ValueError(f"the server sent no visible checks for {slug}")
    fetched.mkdir()
    for name in CHECK_FILES:
        if isinstance(files.get(name), str):
            (fetched / name).write_text(files[name])
    return fetched, limits


def not_compiling(file: Path) -> list[dict]:
    """Notes for the cells of `file` (a .py or .ipynb) that do not compile, each with its place
    and Python's message: the service refuses such a file before it queues it (a notebook's
    cells are run one by one, so the checks still run on the others), and `check` says so
    first. A file that cannot be read at all is the checks' own report to tell."""
    try:
        cells = read(file.read_bytes(), file.name, max_bytes=1 << 40).cells
    except (Unreadable, OSError):
        return []
    notes = []
    for label, code in cells:
        try:
            with warnings.catch_warnings():  # quietly, as the service compiles it
                warnings.simplefilter("ignore")
                compile(code, label, "exec", dont_inherit=True)
        except SyntaxError as exc:
            notes.append(
                {"kind": DOES_NOT_COMPILE, "cell": label, "line": exc.lineno, "message": exc.msg}
            )
        except (RecursionError, MemoryError) as exc:
            notes.append(
                {
                    "kind": DOES_NOT_COMPILE,
                    "cell": label,
                    "line": None,
                    "message": type(exc).__name__,
                }
            )
    return notes
