"""The `hpcgrade` command (the console script), and its subcommands that run the harness here:
`grade`, `exercise new` and `exercise check`.

The others are in admin.py (`db`, `users`, `tokens`, `exercises`, `exercise sync`), courses.py
(`courses`), cluster.py (`slurm`, `pilot`, `sandbox`), demo.py (`demo`) and, a student's,
hpcgrade/terminal.py (`login`, `my-courses`, `starter`, `check`, `submit`), each module imported only when its subcommand runs (click's
lazy-group pattern), so that `hpcgrade grade` on a compute node loads neither Flask, SQLAlchemy
nor Celery.
"""

from __future__ import annotations

import importlib
import json
import sys
import tempfile
import uuid
from dataclasses import replace
from pathlib import Path

import click

from hpcgrade.summary import summary
from server.core.catalogue import (
    SLUG,
    ExerciseConfigError,
    ExerciseInfo,
    default_root,
    load_exercise_info,
)
from worker.cli.self_check import derived_check, self_check, too_few
from worker.harness import spool
from worker.harness.jobs import Job
from worker.harness.report import Report
from worker.harness.runner import HarnessFailed, HarnessProcess

LANGS = click.Choice(["en", "es"])


class LazyGroup(click.Group):
    """A group whose subcommands are named "module:attribute" and imported when used."""

    def __init__(self, *args, lazy: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.lazy:
            return super().get_command(ctx, name)
        module, _, attribute = self.lazy[name].partition(":")
        return getattr(importlib.import_module(module), attribute)


@click.group(
    cls=LazyGroup,
    lazy={
        "db": "worker.cli.admin:db_group",
        "users": "worker.cli.admin:users_group",
        "tokens": "worker.cli.admin:tokens_group",
        "exercises": "worker.cli.courses:list_exercises",
        "demo": "worker.cli.demo:demo",
        "courses": "worker.cli.courses:courses_group",
        "login": "hpcgrade.terminal:login",
        "submit": "hpcgrade.terminal:submit",
        "my-courses": "hpcgrade.terminal:my_courses",
        "starter": "hpcgrade.terminal:starter",
        "check": "hpcgrade.terminal:check",
        "slurm": "worker.cli.cluster:slurm_group",
        "pilot": "worker.cli.cluster:pilot_group",
        "sandbox": "worker.cli.cluster:sandbox_group",
        "settings": "worker.cli.admin:settings_reference",
    },
)
def main() -> None:
    """Grade PyTorch exercises in a sandbox, with autograd diagnostics."""


@main.group("exercise", cls=LazyGroup, lazy={"sync": "worker.cli.courses:exercises_sync"})
def exercise_group() -> None:
    """Work on exercises."""


TEMPLATE = Path(__file__).resolve().parents[2] / "server" / "exercise_template"


def _exercise(slug: str, root: Path | None = None) -> ExerciseInfo:
    root = root or default_root()
    path = root / slug
    if not SLUG.match(slug) or not (path / "exercise.toml").is_file():
        known = sorted(p.parent.name for p in root.glob("*/exercise.toml"))
        raise click.UsageError(f"unknown exercise {slug!r}; known: {', '.join(known)}")
    try:
        return load_exercise_info(path)
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


def _harness(python: str | None, scratch: str) -> HarnessProcess:
    try:
        return HarnessProcess(python=python, scratch=scratch)
    except HarnessFailed as exc:
        raise click.ClickException(f"the grader could not start: {exc}") from None


@main.command("grade")
@click.argument("exercise")
@click.argument(
    "files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
@click.option("--json", "as_json", is_flag=True, help="One JSON report per file, one per line.")
@click.option("--lang", type=LANGS, default="en", show_default=True)
@click.option("--seed", type=int, help="Fix the hidden inputs (default: fresh every run).")
@click.option(
    "--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True
)
@click.option(
    "--python",
    "python",
    help="Interpreter of the course venv (default: this one; with "
    "--executor slurm, COURSE_PYTHON where it is set, else this one).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "slurm"]),
    default="local",
    show_default=True,
    help="slurm: in one job of the cluster the service's settings "
    "name (HPCGRADE_CONFIG), through its spool; waits for it.",
)
def grade_files(
    exercise: str,
    files: tuple[Path, ...],
    as_json: bool,
    lang: str,
    seed: int | None,
    device: str,
    python: str | None,
    executor: str,
) -> None:
    """Grade FILES (.py or .ipynb) for EXERCISE with one warm harness."""
    info = _exercise(exercise)
    jobs = [info.job(path, lang=lang, seed=seed, device=device) for path in files]
    reports = _on_slurm(info, jobs, python) if executor == "slurm" else _here(jobs, python)
    for path, report in zip(files, reports):
        shown = report.to_dict()
        click.echo(json.dumps({"file": str(path), **shown}) if as_json else summary(path, shown))
    sys.exit(0 if all(r.graded for r in reports) else 1)


def _here(jobs: list[Job], python: str | None) -> list[Report]:
    """Each job's report, from one warm harness; one that failed (it stopped answering, say)
    is replaced for the next job."""
    reports = []
    with tempfile.TemporaryDirectory(prefix="hpcgrade-cli-") as scratch:
        harness = _harness(python, scratch)
        try:
            for job in jobs:
                if harness.process.poll() is not None:
                    harness.close()
                    harness = _harness(python, scratch)
                try:
                    reports.append(harness.report_for(job))
                except HarnessFailed as exc:
                    reports.append(Report.grader_error(str(exc), job.exercise))
        finally:
            harness.close()
    return reports


def _on_slurm(info: ExerciseInfo, jobs: list[Job], python: str | None) -> list[Report]:
    """The files as runs of the spool (ids of their own), graded in one job of their shape, by
    `python`, else COURSE_PYTHON, else the interpreter this command runs under: the node's own
    python3 rarely has torch, and this one has (a checkout's .venv, on the shared filesystem)."""
    from worker.cli.cluster import slurm_executor
    from worker.grading.executor import ClusterError, submit_and_wait

    slurm = slurm_executor()
    shape = info.resources(slurm.default)
    if python or shape.python is None:
        shape = replace(shape, python=python or sys.executable)
    batch = f"cli-{uuid.uuid4().hex[:12]}"
    spooled = [
        spool.write_run(
            slurm.spool, replace(job, id=f"{batch}-{n}"), Path(job.submission).read_bytes()
        )
        for n, job in enumerate(jobs)
    ]
    try:
        return submit_and_wait(slurm, spooled, shape)
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        for job in spooled:
            spool.remove_run(slurm.spool, job.id)


COURSE_OPTION = click.option(
    "--course",
    "course_slug",
    metavar="SLUG",
    help="Course SLUG's exercises folder (default: the service's).",
)


def _course_root(course_slug: str | None) -> Path | None:
    """The course's exercises folder, from the database; None: the service's folder."""
    if course_slug is None:
        return None
    from worker.cli.courses import course_folder  # not at import: `grade` loads no database

    return course_folder(course_slug)


@exercise_group.command("new")
@click.argument("slug")
@COURSE_OPTION
def new_exercise(slug: str, course_slug: str | None) -> None:
    """Start exercise SLUG in the exercises folder from a template that passes its own check."""
    import shutil

    if not SLUG.match(slug):
        raise click.UsageError(
            f"{slug!r}: an exercise's name is lower-case words joined by hyphens, like autograd-q"
        )
    target = (_course_root(course_slug) or default_root()) / slug
    if target.exists():
        raise click.ClickException(f"{target} already exists")
    shutil.copytree(TEMPLATE, target, ignore=shutil.ignore_patterns("__pycache__"))
    course = f" --course {course_slug}" if course_slug else ""
    click.echo(
        f"created {target}: write its files as docs/writing-an-exercise.md says, "
        f"then run `hpcgrade exercise check {slug}{course}`"
    )


@exercise_group.command("check")
@click.argument("slugs", nargs=-1)
@click.option(
    "--seed",
    "seeds",
    type=int,
    multiple=True,
    help="Fix the hidden inputs; repeat for several runs (default: three fresh seeds).",
)
@click.option(
    "--write-visible-mistakes",
    is_flag=True,
    help="Write each exercise's visible_mistakes.json: the known wrong programs' "
    "failures of the visible checks, with which `check` names them.",
)
@click.option(
    "--derived",
    is_flag=True,
    help="Also grade the wrong programs the grader derives from each reference: none "
    "may reach full marks on some seeds and lose points on others.",
)
@click.option(
    "--device",
    type=click.Choice(["auto", "cpu", "cuda"]),
    default="auto",
    show_default=True,
    help="Where the programs run (auto: CUDA where torch sees a GPU, as the service grades): "
    "every program must score the same on either.",
)
@COURSE_OPTION
def check_exercises(
    slugs: tuple[str, ...],
    seeds: tuple[int, ...],
    write_visible_mistakes: bool,
    derived: bool,
    device: str,
    course_slug: str | None,
) -> None:
    """Grade each reference (full marks, on the visible checks too) and mutant (must lose points
    with its code; a known wrong program must be named, and lose the same points on every seed),
    each forged variant (must score no more than the mutant it forges) and each student program
    (must lose the same points on every seed, with its code and a diagnostic that names its
    mistake), and visible_mistakes.json."""
    # not at import: `hpcgrade grade` stays light
    from worker.cli.admin import catalogue
    from worker.cli.courses import course_exercises

    root = _course_root(course_slug)
    every = (lambda: course_exercises(course_slug)) if course_slug else catalogue
    infos = [_exercise(s, root) for s in slugs] if slugs else list(every().values())
    problems = 0
    with (
        tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as scratch,
        tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as second_scratch,
        _harness(None, scratch) as harness,
        _harness(None, second_scratch) as second,
    ):
        for info in infos:
            found = too_few(info) + self_check(
                harness,
                info,
                seeds or (None, None, None),
                write_visible_mistakes,
                device,
                second=second,
            )
            if derived:
                tally = derived_check(harness, info, seeds or (None, None, None), device)
                found += tally.problems
                click.echo(
                    f"     {info.slug}: {tally.programs} derived wrong programs, "
                    f"{len(tally.equivalent)} at full marks on every seed, "
                    f"{len(tally.told)} named on every seed"
                )
            for problem in found:
                click.echo(f"FAIL {info.slug}: {problem}")
            click.echo(
                f"{'FAIL' if found else 'ok  '} {info.slug} (reference + "
                f"{len(info.mutants)} mutants, {len(info.wrong_programs)} known wrong "
                f"programs, {len(info.forged)} forged variants, "
                f"{len(info.student_programs)} student programs, {len(seeds) or 3} seeds)"
            )
            problems += len(found)
    if problems:
        raise click.ClickException(f"{problems} problem(s)")
