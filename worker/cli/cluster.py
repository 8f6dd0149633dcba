"""`hpcgrade slurm check|prune`, `hpcgrade pilot start|list|stop` and `hpcgrade sandbox check`:
the cluster, for its admins. Every open course is checked, with its own python and Slurm
settings, each line naming its course; a pilot is started for one course."""

from __future__ import annotations

import dataclasses
import datetime as dt
import getpass
import math
import time
from pathlib import Path

import click
from sqlalchemy.exc import SQLAlchemyError

from server.core.catalogue import ExerciseConfigError, default_root
from server.core.config import ConfigError, Resources, Settings, load_settings
from server.core.courses import (
    CourseError,
    course_catalogue,
    exercises_path,
    find_course,
    open_courses,
)
from server.core.db import Database
from server.core.models import Course
from worker.grading.executor import ClusterError, ImpossibleRequest, JobState
from worker.grading.pilots import Pilots
from worker.grading.sandbox_probe import (
    ProbeFailed,
    probe_here,
    probe_on_slurm,
    runs_as_the_submitter,
    unsafe,
)
from worker.grading.shapes import Shape, course_shape
from worker.grading.slurm import SlurmExecutor
from worker.grading.slurm_text import parse_sbatch
from worker.grading.spool_prune import prune_spool
from worker.harness.runner import PACKAGE_ROOT

PILOT_SCRIPT = f"{PACKAGE_ROOT}/deploy/slurm/pilot.sbatch"


def slurm_executor() -> SlurmExecutor:
    """The Slurm executor of the service's settings (HPCGRADE_CONFIG), or a clear refusal."""
    try:
        return SlurmExecutor(load_settings())
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def courses_of_the_service(settings: Settings, slug: str | None = None) -> list[Course]:
    """The open courses (or the course named), or a clear refusal."""
    database = Database(settings.database_url)
    try:
        with database.sessions() as session:
            if slug:
                return [find_course(session, slug)]
            found = open_courses(session)
    except CourseError as exc:
        raise click.ClickException(str(exc)) from None
    except SQLAlchemyError as exc:
        raise click.ClickException(
            f"cannot read the courses from the database: {getattr(exc, 'orig', None) or exc}"
        ) from None
    finally:
        database.dispose()
    if not found:
        raise click.ClickException("no open course: `hpcgrade courses create` makes one")
    return found


def course_shapes(course: Course, settings: Settings) -> tuple[dict[str, Shape], list[str]]:
    """Every shape the course's runs would ask for, each named by who asks for it (the course,
    an exercise of it), and the problems of reading its exercises."""
    shape = course_shape(course, settings.slurm_resources)
    shapes = {f"course {course.slug} (its [slurm] over SLURM_*)": shape}
    try:
        exercises = course_catalogue(course)
    except (ExerciseConfigError, OSError) as exc:
        return shapes, [f"course {course.slug}: bad exercise: {exc}"]
    return shapes | {
        f"course {course.slug}, exercise {slug}": info.resources(shape)
        for slug, info in exercises.items()
    }, []


@click.group("slurm")
def slurm_group() -> None:
    """The Slurm cluster the grades run on."""


@slurm_group.command("check")
@click.option(
    "--wait",
    "wait_seconds",
    type=click.FloatRange(1),
    default=300,
    show_default=True,
    help="How long each probe job may wait for a node, in seconds.",
)
@click.option(
    "--probe/--no-probe",
    default=True,
    show_default=True,
    help="Submit the sandbox probe jobs (the dispatcher's unit skips them: a busy "
    "partition would hold its start).",
)
def check(wait_seconds: float, probe: bool) -> None:
    """Make sure the cluster can run every open course's jobs (each with the course's python,
    account, partition, QoS and its exercises' [slurm]), and that its nodes raise every
    required sandbox layer, as an account other than the one submitting the jobs (a probe job
    per course, partition and GPU shape); a deploy step: the dispatcher's unit runs it before
    starting."""
    slurm, settings = slurm_executor(), load_settings()
    click.echo(slurm.spool_space())
    courses = courses_of_the_service(settings)
    shapes, problems = {}, []
    for course in courses:
        found_shapes, unread = course_shapes(course, settings)
        shapes |= found_shapes
        problems += unread
    cluster_problems, warnings = slurm.check(shapes)
    problems += cluster_problems
    for problem in problems:
        click.echo(f"cannot run: {problem}", err=True)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if problems:
        raise click.ClickException(
            f"{len(problems)} problem(s): {what_to_fix(slurm, shapes, problems)}"
        )
    for partition in sorted({shape.partition for shape in shapes.values()}, key=str):
        fits = slurm.limits(partition)
        click.echo(
            f"ok: every exercise of {_courses_on(shapes, partition)} fits partition "
            f"{fits.partition} (largest node: {fits.cpus} CPUs, {fits.memory} MB, "
            f"{fits.gpus} GPUs)"
        )
    if probe:
        _probe_courses(slurm, courses, shapes, settings, wait_seconds)


def what_to_fix(slurm: SlurmExecutor, shapes: dict[str, Shape], problems: list[str]) -> str:
    """Where the problems found are fixed: a course with no python names COURSE_PYTHON (its
    jobs would run the node's python3, which rarely has torch); the others are the cluster's."""
    no_python = (
        {shape.course for shape in shapes.values() if shape.python is None}
        if slurm.python_unset
        else set()
    )
    fixes = (
        [
            "set COURSE_PYTHON to the course venv's python as the nodes see it (or a course's "
            "own: `hpcgrade courses edit SLUG --python PATH`)"
        ]
        if no_python
        else []
    )
    if len(problems) > len(no_python):
        fixes.append("fix SLURM_*, the courses' Slurm settings or the exercises' [slurm] tables")
    return "; ".join(fixes)


def _courses_on(shapes: dict[str, Shape], partition: str | None) -> str:
    courses = sorted({shape.course for shape in shapes.values() if shape.partition == partition})
    return f"course{'s' if len(courses) > 1 else ''} {', '.join(courses)}"


def _probe_courses(
    slurm: SlurmExecutor,
    courses: list[Course],
    shapes: dict[str, Shape],
    settings: Settings,
    wait_seconds: float,
) -> None:
    """A probe job per course, partition and GPU shape, with the course's python, options and
    exercises folder."""
    folders = {course.slug: exercises_path(course) for course in courses}
    probed = {(s.course, s.partition, s.gpus > 0): s for s in shapes.values()}
    found = []
    for shape in probed.values():
        where = f"course {shape.course}, partition {shape.partition or '(default)'}"
        try:
            answer = probe_on_slurm(slurm, shape, folders[shape.course], settings, wait_seconds)
        except ProbeFailed as exc:
            found.append(f"{where}: {exc}")
            continue
        problems = unsafe(answer) + runs_as_the_submitter(answer, getpass.getuser())
        found += [f"course {shape.course}: {problem}" for problem in problems]
        click.echo(
            f"{where}: probe on {answer.get('node')} as {answer.get('user')}: sandbox "
            f"layers {', '.join(answer.get('layers', []))}{_cuda(answer)}"
        )
    for problem in found:
        click.echo(f"unsafe: {problem}", err=True)
    if found:
        raise click.ClickException(f"{len(found)} problem(s) with the nodes' sandbox")


def _cuda(answer: dict) -> str:
    return "; CUDA in the student process: ready" if answer.get("cuda") == "ready" else ""


@slurm_group.command("prune")
def prune() -> None:
    """Remove the job logs, dead pilots' folders and runs' folders left behind that are older
    than SPOOL_KEEP_DAYS (beat does it every hour)."""
    try:
        settings = load_settings()
        click.echo(prune_spool(settings, Database(settings.database_url)))
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except SQLAlchemyError as exc:  # which runs are running is not known: none may go
        raise click.ClickException(
            f"cannot read the database, nothing pruned: {getattr(exc, 'orig', None) or exc}"
        ) from None


@click.group("sandbox")
def sandbox_group() -> None:
    """The sandbox that student code runs in."""


@sandbox_group.command("check")
def sandbox_check() -> None:
    """Start a student process on this machine as a grade does (the demo, the local executor),
    with COURSE_PYTHON and the exercises folder, then with each open course's python and
    exercises folder where they differ: name the sandbox layers it lacks and the code this
    account could write. A machine without the database checks COURSE_PYTHON alone."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    probed: dict[tuple[str | None, Path], list[str]] = {(None, default_root()): []}
    try:
        courses = courses_of_the_service(settings)
    except click.ClickException as exc:
        click.echo(f"warning: {exc.message}: COURSE_PYTHON alone is checked", err=True)
        courses = []
    for course in courses:
        probed.setdefault((course.course_python, exercises_path(course)), []).append(course.slug)
    found = []
    for (python, code), slugs in probed.items():
        who = (
            f"course{'s' if len(slugs) > 1 else ''} {', '.join(slugs)}"
            if slugs
            else "COURSE_PYTHON"
        )
        found += _probe_here(settings, who, python, code)
    if found:
        raise click.ClickException(f"{len(found)} problem(s) with this machine's sandbox")


def _probe_here(settings: Settings, who: str, python: str | None, code: Path) -> list[str]:
    try:
        answer = probe_here(settings, python, code)
    except ProbeFailed as exc:
        found = [f"{who}: {exc}"]
    else:
        click.echo(
            f"{who}: sandbox layers on {answer.get('node')} as {answer.get('user')}: "
            f"{', '.join(answer.get('layers', []))}{_cuda(answer)}"
        )
        found = [f"{who}: {problem}" for problem in unsafe(answer)]
    for problem in found:
        click.echo(f"unsafe: {problem}", err=True)
    return found


@click.group("pilot")
def pilot_group() -> None:
    """Pilots: allocations that grade as runs arrive, with a warm harness."""


@pilot_group.command("start")
@click.option(
    "--course",
    "course_slug",
    help="The course whose runs it grades (needed where "
    "more than one is open), with its python and Slurm settings.",
)
@click.option(
    "--hours",
    type=click.FloatRange(0.1),
    default=2.0,
    show_default=True,
    help="How long the allocation holds.",
)
@click.option("--gpus", type=click.IntRange(0), help="Default: the course's GPUs.")
@click.option("--partition", help="Default: the course's partition.")
def start(course_slug: str | None, hours: float, gpus: int | None, partition: str | None) -> None:
    """Submit a pilot for a course; the dispatcher sends it that course's runs once its
    heartbeat appears."""
    slurm, settings = slurm_executor(), load_settings()
    course = _one_course(settings, course_slug)
    minutes = max(int(hours * 60), 1)
    shape = dataclasses.replace(
        course_shape(course, settings.slurm_resources),
        time=minutes,
        **({"gpus": gpus} if gpus is not None else {}),
        **({"partition": partition} if partition else {}),
    )
    unfit = pilot_unfit(slurm, shape, hours)
    if unfit:
        raise click.ClickException(f"pilot not submitted: {'; '.join(unfit)}")
    variables = {
        "HPCGRADE_SPOOL": slurm.spool,
        "HPCGRADE_HOME": PACKAGE_ROOT,
        "HPCGRADE_PYTHON": slurm.python_of(shape),
        "HPCGRADE_PILOT_MINUTES": minutes,
        "HPCGRADE_MODULES": " ".join(slurm.modules),
    }
    # a pilot restarted on another node would find itself stopped: the service saw it end
    options = slurm.options(shape, "pilot", requeue=False, job_name=shape.pilot_name)
    export = "--export=" + ",".join(f"{k}={v}" for k, v in variables.items())
    with open(PILOT_SCRIPT) as script:
        try:
            job_id = parse_sbatch(
                slurm.commands.run(["sbatch", "--parsable", *options, export], stdin=script.read())
            )
        except ClusterError as exc:
            raise click.ClickException(str(exc)) from None
    Pilots(slurm.spool).belong(job_id, shape)
    click.echo(
        f"pilot {job_id} of course {course.slug} submitted for {minutes} min; "
        "`hpcgrade pilot list` shows when it takes runs"
    )


def _one_course(settings: Settings, slug: str | None) -> Course:
    """The course named, or the only open one."""
    courses = courses_of_the_service(settings, slug)
    if len(courses) > 1:
        raise click.UsageError(
            f"name the pilot's course with --course: one of "
            f"{', '.join(course.slug for course in courses)}"
        )
    return courses[0]


def pilot_unfit(slurm: SlurmExecutor, resources: Resources, hours: float) -> list[str]:
    """Why the partition could never start this pilot (sbatch would take it, and it would stay
    pending for good), naming the option to change; nothing when the limits cannot be read
    (sbatch then says what is wrong)."""
    try:
        fits = slurm.limits(resources.partition)
    except ImpossibleRequest as exc:
        return [str(exc)]
    except ClusterError:
        return []
    unfit = [
        f"{too_large} (SLURM_CPUS, SLURM_MEMORY, --gpus)" for too_large in fits.too_large(resources)
    ]
    if fits.time is not None and resources.time > fits.time:
        most = math.floor(fits.time / 60 * 100) / 100
        unfit.append(
            f"partition {fits.partition} allows {fits.time} minutes; --hours {hours:g} "
            f"asks {resources.time}: use --hours {most:g} or less"
        )
    return unfit


@pilot_group.command("list")
@click.option("--all", "every", is_flag=True, help="Dead pilots too, marked dead.")
def list_pilots(every: bool) -> None:
    """The pilots of every open course: live ones (a fresh heartbeat in the spool) and those
    Slurm lists that may still take runs (pending with squeue's reason, or started without a
    heartbeat yet); with --all, the dead ones too. Course, node, GPUs, Slurm state, heartbeat,
    runs graded."""
    slurm = slurm_executor()
    pilots = Pilots(slurm.spool)
    beats = pilots.heartbeats()
    try:
        states = slurm.pilot_jobs(_course_shapes(load_settings()))
    except ClusterError as exc:
        click.echo(f"Slurm does not answer ({exc}); heartbeats only", err=True)
        states = {}
    click.echo(
        f"{'pilot':>10} {'course':12} {'node':12} {'gpus':>4} {'state':12} {'beat':>8} "
        f"{'graded':>6} {'grading':>8}  until"
    )
    now = time.time()
    for name in sorted(beats.keys() | states.keys(), key=lambda name: (len(name), name)):
        beat, state = beats.get(name), states.get(name)
        dead = not Pilots.alive(beat, now) and not (state and state.outcome == "waiting")
        if every or not dead:
            course = (pilots.course_of(name) or {}).get("course") or "—"
            click.echo(_pilot_line(name, course, beat, state, now, dead))


def _course_shapes(settings: Settings) -> list[Shape]:
    return [
        course_shape(course, settings.slurm_resources)
        for course in courses_of_the_service(settings)
    ]


def _pilot_line(
    name: str, course: str, beat: dict | None, state: JobState | None, now: float, dead: bool
) -> str:
    notes = [
        f"({state.reason})" if state and state.reason else "",
        "(stopping)" if beat and beat.get("stopping") else "",
        "(dead)" if dead else "",
    ]
    if beat is None:
        shown = ["—", "—", "—", "—", "—", "—"]
    else:
        until = dt.datetime.fromtimestamp(float(beat.get("until", 0))).strftime("%H:%M")
        shown = [
            str(beat.get("node")),
            beat.get("gpus", 0),
            f"{now - float(beat.get('beat', 0)):7.1f}s",
            beat.get("graded", 0),
            beat.get("grading") or "—",
            until,
        ]
    node, gpus, age, graded, grading, until = shown
    return " ".join(
        [
            f"{name:>10} {course:12} {node:12} {gpus:>4} "
            f"{(state.state if state else '?'):12} "
            f"{age:>8} {graded:>6} {grading:>8}  {until}",
            *filter(None, notes),
        ]
    )


@pilot_group.command("stop")
@click.argument("names", nargs=-1)
@click.option(
    "--all",
    "every",
    is_flag=True,
    help="Every pilot in the spool, and those Slurm has not started.",
)
@click.option("--now", is_flag=True, help="Cancel the job at once (its runs are sent elsewhere).")
def stop(names: tuple[str, ...], every: bool, now: bool) -> None:
    """Ask pilots to finish the runs they hold and end. One not started yet holds no run, and
    would never read the request: it is cancelled."""
    slurm = slurm_executor()
    pilots = Pilots(slurm.spool)
    chosen = sorted(pilots.heartbeats().keys() | _waiting_jobs(slurm)) if every else list(names)
    if not chosen:
        raise click.UsageError("name the pilots to stop, or --all")
    unstarted = [name for name in chosen if not pilots.stop(name)]
    cancelled = chosen if now else unstarted
    try:
        slurm.cancel(cancelled)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    asked = [name for name in chosen if name not in cancelled]
    if asked:
        click.echo(f"stopping: {', '.join(asked)}")
    if cancelled:
        click.echo(f"cancelled{'' if now else ', not started'}: {', '.join(cancelled)}")


def _waiting_jobs(slurm: SlurmExecutor) -> set[str]:
    """The open courses' pilot jobs Slurm has not ended."""
    try:
        return {
            name
            for name, state in slurm.pilot_jobs(_course_shapes(load_settings())).items()
            if state.outcome == "waiting"
        }
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
