"""`python -m worker.harness`: the trusted grader's commands, under the course venv's Python.

- `serve` reads jobs as JSON lines on stdin and writes one report per job, as a JSON line, on the
  stdout it was started with (first line: {"ready": true}).
- `spool SPOOL RUN_ID...` grades runs the service left in a spool (see spool.py) and writes each
  report there as soon as it is done: what a Slurm batch job runs, with no route to the service.
- `pilot SPOOL --minutes M` grades runs as the service assigns them, until stopped (pilot.py).
- `probe` says whether this node can grade safely as this account (probe.py): one JSON line.

Anything else that prints (torch warnings, an exercise's own prints) goes to stderr, so stdout
carries reports only. Runs with the standard library, torch and numpy: a course venv suffices.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING

from worker.harness import spool
from worker.harness.jobs import REQUIRED_LAYERS, Job, Limits
from worker.harness.launch import Zygote, child_environment, import_torch_for_a_forked_zygote
from worker.harness.report import HARNESS_START, Report, clip, host_environment

if TYPE_CHECKING:
    from worker.harness.grader import Harness


class CannotGrade(Exception):
    """The harness itself cannot start here: no torch in this venv, or the zygote died."""


def start_harness(scratch_root: str | None, sealed: bool = True) -> Harness:
    """torch is imported once: the zygote is forked right after, before this process reads a
    job or runs a torch operation, and its warm-up overlaps the grader's. The seconds the start
    took go with the first report (report.HARNESS_START)."""
    started = time.perf_counter()
    try:
        import_torch_for_a_forked_zygote()
    except Exception as exc:  # ImportError, or OSError from a broken torch install
        raise CannotGrade(
            f"{sys.executable} cannot grade: {exc} (the course venv needs torch and numpy)"
        ) from None
    zygote = Zygote(child_environment(), sealed, fork=True)
    try:
        from worker.harness.grader import Harness
    except Exception as exc:
        zygote.close()
        raise CannotGrade(f"{sys.executable} cannot grade: {exc}") from None
    try:
        harness = Harness(scratch_root, zygote, sealed)  # which closes the zygote when it fails
    except Exception as exc:
        raise CannotGrade(f"the harness could not start: {type(exc).__name__}: {exc}") from None
    harness.start_seconds = time.perf_counter() - started
    return harness


def error_report(exercise: str | None, job_id: str | None, message: str) -> Report:
    """The grader failed, not the submission, here and now."""
    return Report.grader_error(
        message, exercise, job_id, host_environment(), {"started_at": time.time()}
    )


def report_or_error(harness: Harness, job: Job) -> Report:
    """The job's report, or the grader's error report when the harness itself fails; the
    harness's first says how long it took to start."""
    try:
        report = harness.grade_job(job)
    except Exception as exc:
        traceback.print_exc()
        report = error_report(job.exercise, job.id, clip(f"{type(exc).__name__}: {exc}"))
    started_in, harness.start_seconds = harness.start_seconds, None
    if started_in is None:
        return report
    return dataclasses.replace(report, timing={**report.timing, HARNESS_START: started_in})


def serve(scratch_root: str | None, sealed: bool = True) -> int:
    reports = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    try:
        return _serve(reports, scratch_root, sealed)
    except BrokenPipeError:
        # whoever asked is gone (a `check` stopped with Ctrl-C, a worker killed): nobody reads
        # the answer, and a traceback would land on their terminal, which stderr still is
        os.dup2(os.open(os.devnull, os.O_WRONLY), reports.fileno())
        return 0


def _serve(reports, scratch_root: str | None, sealed: bool) -> int:
    try:
        harness = start_harness(scratch_root, sealed)
    except CannotGrade as exc:
        reports.write(json.dumps({"ready": False, "error": str(exc)}) + "\n")
        return 1
    with harness:
        reports.write(json.dumps({"ready": True}) + "\n")
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                job = Job.from_dict(json.loads(line))
            except (ValueError, TypeError) as exc:
                report = error_report(None, None, f"not a job: {exc}")
            else:
                report = report_or_error(harness, job)
            reports.write(json.dumps(report.to_dict()) + "\n")
    reports.close()
    return 0


# --- spool -----------------------------------------------------------------------------------


def log(message: str) -> None:
    print(f"hpcgrade: {message}", file=sys.stderr, flush=True)


def read_job(folder: Path) -> Job | Report:
    """The run's job, or the grader's error report when its job.json cannot be read."""
    try:
        return spool.read_job(folder)
    except spool.UnreadableRun as exc:
        return error_report(None, folder.name, str(exc))


def grade_run(harness: Harness, folder: Path, job: Job | Report) -> Report:
    """Grade one run of the spool and write its report there (unless the service took the run
    back meanwhile: then nobody reads it)."""
    report = job if isinstance(job, Report) else report_or_error(harness, job)
    try:
        spool.write_report(folder, report)
    except FileNotFoundError:
        log(f"run {folder.name}: the service took it back while it was graded")
    return report


def _to_grade(folder: Path) -> bool:
    if not folder.is_dir():
        log(f"run {folder.name}: the service took it back, skipped")
        return False
    if spool.has_report(folder):
        restarts = os.environ.get("SLURM_RESTART_COUNT", "unset")
        log(f"run {folder.name}: already reported, skipped (SLURM_RESTART_COUNT={restarts})")
        return False
    if spool.is_cancelled(folder):
        log(f"run {folder.name}: cancelled, skipped")
        return False
    if spool.is_not_started(folder):  # an earlier start of this job left it to the queue
        log(f"run {folder.name}: left to the queue, skipped")
        return False
    return True


def _summary(report: Report) -> str:
    if not report.graded:
        return f"error: {report.error}"
    return f"graded {report.score:g}/{report.max_score:g} in {report.timing['total']:.2f} s"


# set by SIGUSR1, which Slurm sends a batch job some time before its time limit (--signal)
STOP_TAKING = {"asked": False}


def _stop_taking(_signum, _frame) -> None:
    STOP_TAKING["asked"] = True


def _time_for(job: Job | Report, until: float | None) -> bool:
    """Whether the run could end before the job's time limit (`until`, seconds since the
    epoch), at its exercise's budget and the second look's time."""
    if STOP_TAKING["asked"]:
        return False
    if until is None or isinstance(job, Report):  # an error report takes no time
        return True
    try:
        limits = Limits.from_dict(job.limits)
    except (ValueError, TypeError):  # the grader refuses them: its error report takes none
        return True
    return time.time() + spool.run_seconds(limits) <= until


def _leave(folders: list[Path], why: str) -> None:
    """Runs this job will not grade: marked so, for the service to queue them again."""
    for folder in folders:
        try:
            if not spool.has_report(folder):
                spool.mark_not_started(folder)
                log(f"run {folder.name}: not started, {why}: back to the queue")
        except OSError:  # the service took it back meanwhile
            pass


def grade_spool(
    root: Path, run_ids: list[str], scratch_root: str | None, until: float | None = None
) -> int:
    """0 whenever the harness worked, whatever the reports say: one bad file must not mark the
    whole batch job FAILED. Without a harness, every run still unreported gets an error report.
    Each run is marked started first. Past the first run, none is started that could not end
    before `until` (the job's time limit), nor after SIGUSR1: those are marked not started."""
    folders = [f for f in (spool.run_dir(root, run_id) for run_id in run_ids) if _to_grade(f)]
    if not folders:
        return 0
    try:
        harness = start_harness(scratch_root)
    except CannotGrade as exc:
        for folder in folders:
            if not spool.has_report(folder):
                spool.write_report(folder, error_report(None, folder.name, str(exc)))
                log(f"run {folder.name}: error: {exc}")
        return 1
    with harness:
        taken = 0
        for index, folder in enumerate(folders):
            if not _to_grade(folder):  # asked again: a run may be cancelled while others are graded
                continue
            job = read_job(folder)
            if taken and not _time_for(job, until):  # the first run always: else never
                _leave(
                    folders[index:],
                    "the job's time limit is near"
                    if not STOP_TAKING["asked"]
                    else "Slurm signalled the job's end",
                )
                break
            taken += 1
            try:
                spool.mark_started(folder)
            except OSError:
                continue  # the service took it back
            log(f"run {folder.name}: {_summary(grade_run(harness, folder, job))}")
    return 0


def _terminated(_signum, _frame) -> None:
    raise SystemExit(143)


def serve_pilot(root: Path, minutes: float, scratch_root: str | None) -> int:
    """Grade the runs the service puts in this pilot's inbox until it is stopped or its
    allocation nears its end (see pilot.py)."""
    from worker.harness.pilot import Pilot

    name = os.environ.get("SLURM_JOB_ID") or f"{os.uname().nodename}-{os.getpid()}"
    try:
        harness = start_harness(scratch_root)
        harness.zygote.warm_up()
    except (CannotGrade, RuntimeError) as exc:
        log(f"pilot {name}: {exc}")
        return 1
    log(f"pilot {name}: taking runs for {minutes:g} min")

    def grade_assigned(folder: Path) -> None:
        if _to_grade(folder):
            log(f"run {folder.name}: {_summary(grade_run(harness, folder, read_job(folder)))}")

    # scancel and the time limit send SIGTERM: end at once, the heartbeat saying so, and the
    # service sends the run in hand elsewhere
    signal.signal(signal.SIGTERM, _terminated)
    with harness:
        Pilot(root, name, minutes).serve(grade_assigned)
    log(f"pilot {name}: stopped")
    return 0


def write_probe(required: tuple[str, ...], code: list[str], device: str, out: Path | None) -> int:
    from worker.harness.probe import probe

    answer = json.dumps(probe(required, code, device)) + "\n"
    if out is None:
        sys.stdout.write(answer)
    else:
        spool.write_atomically(out, answer.encode())
    return 0


def main() -> int:
    # before anything slow: Slurm's warning must never find the default action (to end)
    signal.signal(signal.SIGUSR1, _stop_taking)
    parser = argparse.ArgumentParser(prog="python -m worker.harness")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="grade jobs read as JSON lines on stdin")
    serve_parser.add_argument(
        "--unsealed",
        action="store_true",
        help="student processes without the seal: for tests of what it "
        "stops; a job that requires it (the default) is then a "
        "grader error",
    )
    spool_parser = commands.add_parser("spool", help="grade runs of a spool, reports written there")
    spool_parser.add_argument("spool", type=Path)
    spool_parser.add_argument("run_ids", metavar="RUN_ID", nargs="+", type=spool.checked_run_id)
    pilot_parser = commands.add_parser("pilot", help="grade runs as they arrive in the spool")
    pilot_parser.add_argument("spool", type=Path)
    pilot_parser.add_argument(
        "--minutes", type=float, required=True, help="the allocation's time limit"
    )
    spool_parser.add_argument(
        "--until", type=float, help="the job's time limit, in seconds since the epoch"
    )
    for sub in (serve_parser, spool_parser, pilot_parser):
        sub.add_argument("--scratch", help="where student scratch directories go")
    probe_parser = commands.add_parser(
        "probe",
        help="the sandbox layers a student gets here, and the code this account could write",
    )
    probe_parser.add_argument(
        "--require",
        default=",".join(REQUIRED_LAYERS),
        help="the layers that must be raised, comma-separated",
    )
    probe_parser.add_argument(
        "--code", action="append", default=[], help="a folder of code the jobs run (repeat)"
    )
    probe_parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="cuda (auto: where torch sees a GPU): also start CUDA in the "
        "student process, as a grade on a GPU does",
    )
    probe_parser.add_argument("--out", type=Path, help="write the answer here, not to stdout")
    args = parser.parse_args()
    if args.command == "probe":
        return write_probe(
            tuple(filter(None, args.require.split(","))), args.code, args.device, args.out
        )
    if args.command == "serve":
        return serve(args.scratch, sealed=not args.unsealed)
    if args.command == "pilot":
        return serve_pilot(args.spool, args.minutes, args.scratch)
    return grade_spool(args.spool, args.run_ids, args.scratch, args.until)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # torch makes the interpreter's own teardown take about 2 s; the zygote and every student
    # are gone by now (Harness.close), and the reports are written and flushed
    os._exit(code)
