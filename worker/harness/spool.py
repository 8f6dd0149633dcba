"""The spool: runs the service leaves for batch jobs, and the reports the trusted grader leaves back.

The layout is a contract between the service and the harness (standard library only):

    SPOOL/runs/<run_id>/job.json      Job.to_dict(), with "submission" relative to the run folder
    SPOOL/runs/<run_id>/submission.py the submitted file ("submission" + .py or .ipynb)
    SPOOL/runs/<run_id>/report.json   written only by the trusted grader, atomically
    SPOOL/runs/<run_id>/cancelled     when present, the run is skipped
    SPOOL/runs/<run_id>/started       the batch job began grading it (written by the harness)
    SPOOL/runs/<run_id>/not-started   the batch job will not grade it: its time was running
                                      out (the service sends it back to the queue, its
                                      attempt unused)
    SPOOL/done/<run_id>               written after report.json or not-started: the service
                                      lists this one folder each second rather than look into
                                      every run's (a metadata call each on a shared filesystem)

The service account and the grading account share the spool's group, and each writes what the
other reads or removes: folders are made 0o2770 (the set-group-ID bit passes the group on) and
files 0o660, whatever the umask of either.

Each file is written once and read by the other side only: the service keeps the Job it wrote
(`write_run`), the harness the Report it wrote; the harness reads job.json once per run, and
looks whether report.json exists without reading it. report.json is `Report.to_dict()`, read
back with `Report.parse`, so a garbled or oversized one is the grader's error of that run.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from worker.harness.jobs import Job, Limits
from worker.harness.report import MAX_REPORT_BYTES, Report

FOLDER_MODE = 0o2770
FILE_MODE = 0o660
JOB, REPORT, CANCELLED, DONE = "job.json", "report.json", "cancelled", "done"
STARTED, NOT_STARTED = "started", "not-started"
# what one run may take beyond its exercise's budget_seconds: the second look's own time
# (second_look.SECONDS, 20 s) and one call past it, the student processes' starts, the report
RUN_OVERHEAD_SECONDS = 45.0
ROOM_PROBE = ".room-probe"  # written by no_room, again each time it is asked
SUFFIXES = (".py", ".ipynb")
RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class UnreadableRun(Exception):
    """A run folder whose job.json is missing or cannot be read as a job."""


def checked_run_id(run_id: str) -> str:
    """The run id, if it names a folder under runs/ and nothing else (ValueError otherwise)."""
    if not RUN_ID.fullmatch(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    return run_id


def run_dir(spool: str | os.PathLike, run_id: str) -> Path:
    return Path(spool) / "runs" / checked_run_id(run_id)


def write_run(spool: str | os.PathLike, job: Job, code: bytes) -> Job:
    """The service's side: the run's folder with its submission and job.json (written last, so a
    job.json that exists names a complete run); returns the job as the harness reads it
    (`read_job`), its submission in the run folder."""
    suffix = Path(job.filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"a submission must be {' or '.join(SUFFIXES)}, not {job.filename!r}")
    folder = make_folder(spool, "runs", checked_run_id(job.id))
    name = "submission" + suffix
    write_atomically(folder / name, code)
    write_atomically(folder / JOB, json.dumps(dict(job.to_dict(), submission=name)).encode())
    return replace(job, submission=str(folder.resolve() / name))


def read_job(folder: Path) -> Job:
    """The run's job, its submission an absolute path inside the run folder."""
    try:
        data = json.loads((folder / JOB).read_bytes())
        name = data["submission"]
        if not isinstance(name, str) or Path(name).name != name or name in ("", ".", ".."):
            raise ValueError(f"the submission {name!r} is not a file name in the run folder")
        return Job.from_dict(dict(data, submission=str(folder.resolve() / name)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UnreadableRun(f"{folder / JOB}: {type(exc).__name__}: {exc}") from None


def write_report(folder: Path, report: Report) -> None:
    """Atomic: the service never reads half a report, and a killed grader leaves none."""
    write_atomically(folder / REPORT, json.dumps(report.to_dict()).encode())
    mark_done(folder)


def has_report(folder: Path) -> bool:
    return (folder / REPORT).exists()


def read_report(folder: Path) -> Report | None:
    """The report, None while there is none; a garbled one, or one larger than any the grader
    makes (MAX_REPORT_BYTES), reads as the grader's error, the latter without being read."""
    try:
        with open(folder / REPORT, "rb") as f:
            data, found = f.read(MAX_REPORT_BYTES + 1), os.fstat(f.fileno()).st_size
    except FileNotFoundError:
        return None
    if len(data) > MAX_REPORT_BYTES:
        return Report.grader_error(
            f"the report in {folder} is {found} bytes, more than the "
            f"{MAX_REPORT_BYTES} the service stores"
        )
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        return Report.grader_error(f"the report in {folder} is garbled: {exc}")
    return Report.parse(parsed, f"the report in {folder}")


def run_seconds(limits: Limits) -> float:
    """The longest one run of an exercise with these limits takes in a batch job."""
    return limits.budget_seconds + RUN_OVERHEAD_SECONDS


def mark_started(folder: Path) -> None:
    write_atomically(folder / STARTED, b"")


def was_started(folder: Path) -> bool:
    return (folder / STARTED).exists()


def mark_not_started(folder: Path) -> None:
    write_atomically(folder / NOT_STARTED, b"")
    mark_done(folder)


def mark_done(folder: Path) -> None:
    """The harness is through with the run of this folder (SPOOL/runs/<run_id>)."""
    write_atomically(make_folder(folder.parent.parent, DONE) / folder.name, b"")


def done_runs(spool: str | os.PathLike) -> set[str]:
    """The runs the harness is through with (their report or not-started mark written): one
    listing of one folder."""
    try:
        return {name for name in os.listdir(Path(spool) / DONE) if RUN_ID.fullmatch(name)}
    except FileNotFoundError:
        return set()


def forget_done(spool: str | os.PathLike, run_id: str) -> None:
    try:
        os.unlink(Path(spool) / DONE / checked_run_id(run_id))
    except OSError:  # gone already, or the spool is away (as remove_run, the folder)
        pass


def is_not_started(folder: Path) -> bool:
    return (folder / NOT_STARTED).exists()


def mark_cancelled(folder: Path) -> None:
    write_atomically(folder / CANCELLED, b"")


def is_cancelled(folder: Path) -> bool:
    return (folder / CANCELLED).exists()


def remove_run(spool: str | os.PathLike, run_id: str) -> None:
    shutil.rmtree(run_dir(spool, run_id), ignore_errors=True)
    forget_done(spool, run_id)


def free_mb(spool: str | os.PathLike) -> int | None:
    """Megabytes free on the spool's filesystem; None if it cannot be read (its writes then
    fail on their own)."""
    try:
        return shutil.disk_usage(spool).free // 2**20
    except OSError:
        return None


def below_floor(spool: str | os.PathLike, floor_mb: int) -> int | None:
    """The megabytes free on the spool's filesystem where fewer than `floor_mb` (SPOOL_MIN_FREE_MB;
    under 1 MB whatever it is: no room for a report), else None."""
    free = free_mb(spool)
    return free if free is not None and free < max(floor_mb, 1) else None


def no_room(spool: str | os.PathLike, floor_mb: int) -> str | None:
    """Why the spool cannot take a run's files now, or None: fewer megabytes free than
    `floor_mb` (below_floor), or no file can be written in it (no inode left, a read-only
    mount, its rights), as a small file written there, ROOM_PROBE, shows. One criterion for
    whoever asks: dispatch, which sends nothing meanwhile, and collect, whose own writes fail."""
    free = below_floor(spool, floor_mb)
    if free is not None:
        return f"{free} MB free on {spool}, SPOOL_MIN_FREE_MB is {floor_mb}"
    try:
        write_atomically(make_folder(spool) / ROOM_PROBE, repr(time.time()).encode())
    except OSError as exc:
        return f"cannot write in {spool}: {exc}"
    return None


def held_mb(spool: str | os.PathLike) -> int:
    """Megabytes the spool's files hold (runs, job logs, pilots)."""
    held = 0
    for folder, _, files in os.walk(spool):
        for name in files:
            try:
                held += os.lstat(os.path.join(folder, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return held // 2**20


def make_folder(spool: str | os.PathLike, *names: str) -> Path:
    """SPOOL/names…, each level made so that both accounts can write in it; the spool itself,
    if it is missing, is made plainly (its group and mode are the deployment's)."""
    folder = Path(spool)
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        folder = folder / name
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        os.chmod(folder, FOLDER_MODE)  # mkdir drops the set-group-ID bit and applies the umask
    return folder


def write_atomically(path: Path, data: bytes) -> None:
    """Readers see the old file or the whole new one. No fsync: what a crash of the node could
    leave half-written reads as garbled, and a garbled run is graded again."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
