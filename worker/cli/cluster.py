"""`hpcgrade slurm check|prune`, `hpcgrade pilot start|list|stop` and `hpcgrade sandbox check`:
the cluster, for its admins."""
from __future__ import annotations

import dataclasses
import datetime as dt
import math
import time

import click
from sqlalchemy.exc import SQLAlchemyError

from server.core.config import ConfigError, Resources, load_settings
from server.core.db import Database
from worker.cli.admin import catalogue
from worker.grading.executor import ClusterError, ImpossibleRequest, JobState
from worker.grading.pilots import Pilots
from worker.grading.sandbox_probe import ProbeFailed, probe_here, probe_on_slurm, unsafe
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


@click.group("slurm")
def slurm_group() -> None:
    """The Slurm cluster the grades run on."""


@slurm_group.command("check")
@click.option("--wait", "wait_seconds", type=click.FloatRange(1), default=300, show_default=True,
              help="How long each probe job may wait for a node, in seconds.")
@click.option("--probe/--no-probe", default=True, show_default=True,
              help="Submit the sandbox probe jobs (the dispatcher's unit skips them: a busy "
                   "partition would hold its start).")
def check(wait_seconds: float, probe: bool) -> None:
    """Make sure the cluster can run every exercise's jobs, and that its nodes raise every
    required sandbox layer (a probe job per partition and GPU shape); a deploy step: the
    dispatcher's unit runs it before starting."""
    slurm = slurm_executor()
    click.echo(slurm.spool_space())
    problems, warnings = slurm.check(catalogue())
    for problem in problems:
        click.echo(f"cannot run: {problem}", err=True)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s): fix SLURM_* or the exercises' "
                                   "[slurm] tables")
    fits = slurm.limits(slurm.default.partition)
    click.echo(f"ok: every exercise fits partition {fits.partition} (largest node: {fits.cpus} "
               f"CPUs, {fits.memory} MB, {fits.gpus} GPUs)")
    if not probe:
        return
    settings = load_settings()
    shapes = {(r.partition, r.gpus > 0): r for r in [slurm.default, *(
        info.resources(slurm.default) for info in catalogue().values())]}
    found = []
    for resources in shapes.values():
        try:
            answer = probe_on_slurm(slurm, resources, settings, wait_seconds)
        except ProbeFailed as exc:
            found.append(f"partition {resources.partition or '(default)'}: {exc}")
            continue
        found += unsafe(answer)
        click.echo(f"probe on {answer.get('node')} as {answer.get('user')}: sandbox layers "
                   f"{', '.join(answer.get('layers', []))}{_cuda(answer)}")
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
        raise click.ClickException(f"cannot read the database, nothing pruned: "
                                   f"{getattr(exc, 'orig', None) or exc}") from None


@click.group("sandbox")
def sandbox_group() -> None:
    """The sandbox that student code runs in."""


@sandbox_group.command("check")
def sandbox_check() -> None:
    """Start a student process on this machine as a grade does (the demo, the local executor):
    name the sandbox layers it lacks and the code this account could write."""
    try:
        answer = probe_here(load_settings())
    except (ConfigError, ProbeFailed) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"sandbox layers on {answer.get('node')} as {answer.get('user')}: "
               f"{', '.join(answer.get('layers', []))}{_cuda(answer)}")
    found = unsafe(answer)
    for problem in found:
        click.echo(f"unsafe: {problem}", err=True)
    if found:
        raise click.ClickException(f"{len(found)} problem(s) with this machine's sandbox")


@click.group("pilot")
def pilot_group() -> None:
    """Pilots: allocations that grade as runs arrive, with a warm harness."""


@pilot_group.command("start")
@click.option("--hours", type=click.FloatRange(0.1), default=2.0, show_default=True,
              help="How long the allocation holds.")
@click.option("--gpus", type=click.IntRange(0), help="Default: SLURM_GPUS.")
@click.option("--partition", help="Default: SLURM_PARTITION.")
def start(hours: float, gpus: int | None, partition: str | None) -> None:
    """Submit a pilot; the dispatcher sends it runs once its heartbeat appears."""
    slurm = slurm_executor()
    minutes = max(int(hours * 60), 1)
    resources = dataclasses.replace(slurm.default, time=minutes,
                                    **({"gpus": gpus} if gpus is not None else {}),
                                    **({"partition": partition} if partition else {}))
    unfit = pilot_unfit(slurm, resources, hours)
    if unfit:
        raise click.ClickException(f"pilot not submitted: {'; '.join(unfit)}")
    variables = {"HPCGRADE_SPOOL": slurm.spool, "HPCGRADE_HOME": PACKAGE_ROOT,
                 "HPCGRADE_PYTHON": slurm.python, "HPCGRADE_PILOT_MINUTES": minutes,
                 "HPCGRADE_MODULES": " ".join(slurm.modules)}
    # a pilot restarted on another node would find itself stopped: the service saw it end
    options = slurm.options(resources, slurm.pilot_name, f"hpcgrade {slurm.course} pilot",
                            requeue=False)
    export = "--export=" + ",".join(f"{k}={v}" for k, v in variables.items())
    with open(PILOT_SCRIPT) as script:
        try:
            job_id = parse_sbatch(slurm.commands.run(["sbatch", "--parsable", *options, export],
                                                     stdin=script.read()))
        except ClusterError as exc:
            raise click.ClickException(str(exc)) from None
    click.echo(f"pilot {job_id} submitted for {minutes} min; `hpcgrade pilot list` shows when "
               "it takes runs")


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
    unfit = [f"{too_large} (SLURM_CPUS, SLURM_MEMORY, --gpus)"
             for too_large in fits.too_large(resources)]
    if fits.time is not None and resources.time > fits.time:
        most = math.floor(fits.time / 60 * 100) / 100
        unfit.append(f"partition {fits.partition} allows {fits.time} minutes; --hours {hours:g} "
                     f"asks {resources.time}: use --hours {most:g} or less")
    return unfit


@pilot_group.command("list")
@click.option("--all", "every", is_flag=True, help="Dead pilots too, marked dead.")
def list_pilots(every: bool) -> None:
    """The course's pilots: live ones (a fresh heartbeat in the spool) and those Slurm lists
    that may still take runs (pending with squeue's reason, or started without a heartbeat
    yet); with --all, the dead ones too. Node, GPUs, Slurm state, heartbeat, runs graded."""
    slurm = slurm_executor()
    beats = Pilots(slurm.spool).heartbeats()
    try:
        states = slurm.pilot_jobs()
    except ClusterError as exc:
        click.echo(f"Slurm does not answer ({exc}); heartbeats only", err=True)
        states = {}
    click.echo(f"{'pilot':>10} {'node':12} {'gpus':>4} {'state':12} {'beat':>8} {'graded':>6} "
               f"{'grading':>8}  until")
    now = time.time()
    for name in sorted(beats.keys() | states.keys(), key=lambda name: (len(name), name)):
        beat, state = beats.get(name), states.get(name)
        dead = not Pilots.alive(beat, now) and not (state and state.outcome == "waiting")
        if every or not dead:
            click.echo(_pilot_line(name, beat, state, now, dead))


def _pilot_line(name: str, beat: dict | None, state: JobState | None, now: float,
                dead: bool) -> str:
    notes = [f"({state.reason})" if state and state.reason else "",
             "(stopping)" if beat and beat.get("stopping") else "", "(dead)" if dead else ""]
    if beat is None:
        shown = ["—", "—", "—", "—", "—", "—"]
    else:
        until = dt.datetime.fromtimestamp(float(beat.get("until", 0))).strftime("%H:%M")
        shown = [str(beat.get("node")), beat.get("gpus", 0),
                 f"{now - float(beat.get('beat', 0)):7.1f}s", beat.get("graded", 0),
                 beat.get("grading") or "—", until]
    node, gpus, age, graded, grading, until = shown
    return " ".join([f"{name:>10} {node:12} {gpus:>4} {(state.state if state else '?'):12} "
                     f"{age:>8} {graded:>6} {grading:>8}  {until}", *filter(None, notes)])


@pilot_group.command("stop")
@click.argument("names", nargs=-1)
@click.option("--all", "every", is_flag=True,
              help="Every pilot in the spool, and those Slurm has not started.")
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
    """The course's pilot jobs Slurm has not ended."""
    try:
        return {name for name, state in slurm.pilot_jobs().items() if state.outcome == "waiting"}
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
