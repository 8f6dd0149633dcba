"""The `hpcgrade` command."""
from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import click

from worker.catalogue import (SLUG, ExerciseConfigError, ExerciseInfo, default_root,
                              load_catalogue, load_exercise_info)
from worker.harness.jobs import Job
from worker.runner import HarnessFailed, HarnessProcess

from .commands import db_group, exercises_sync, users_group
from .client import login, submit
from .demo import demo
from .summary import summary

LANGS = click.Choice(["en", "es"])


def _catalogue() -> dict[str, ExerciseInfo]:
    try:
        return load_catalogue()
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


def _exercise(slug: str) -> ExerciseInfo:
    path = default_root() / slug
    if not SLUG.match(slug) or not (path / "exercise.toml").is_file():
        known = sorted(p.parent.name for p in default_root().glob("*/exercise.toml"))
        raise click.UsageError(f"unknown exercise {slug!r}; known: {', '.join(known)}")
    try:
        return load_exercise_info(path)
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


def job_for(info: ExerciseInfo, path: Path, *, lang: str = "en", seed: int | None = None,
            device: str = "auto", job_id: str = "") -> Job:
    return Job(exercise=info.slug, exercise_dir=str(info.path), submission=str(path.resolve()),
               filename=path.name, limits=info.limits, seed=seed, lang=lang, device=device,
               id=job_id)


def _harness(python: str | None, scratch: str) -> HarnessProcess:
    try:
        return HarnessProcess(python=python, scratch=scratch)
    except HarnessFailed as exc:
        raise click.ClickException(f"the grader could not start: {exc}") from None


@click.group()
def main() -> None:
    """Grade PyTorch exercises in a sandbox, with autograd diagnostics."""


main.add_command(db_group)
main.add_command(users_group)
main.add_command(demo)
main.add_command(login)
main.add_command(submit)


@main.command()
@click.argument("exercise")
@click.argument("files", nargs=-1, required=True,
                type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="One JSON report per file, one per line.")
@click.option("--lang", type=LANGS, default="en", show_default=True)
@click.option("--seed", type=int, help="Fix the hidden inputs (default: fresh every run).")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--python", "python", help="Interpreter of the course venv (default: this one).")
def grade(exercise: str, files: tuple[Path, ...], as_json: bool, lang: str, seed: int | None,
          device: str, python: str | None) -> None:
    """Grade FILES (.py or .ipynb) for EXERCISE with one warm harness."""
    info = _exercise(exercise)
    failed = False
    with tempfile.TemporaryDirectory(prefix="hpcgrade-cli-") as scratch, \
            _harness(python, scratch) as harness:
        for path in files:
            try:
                report = harness.grade(job_for(info, path, lang=lang, seed=seed, device=device))
            except HarnessFailed as exc:
                report = {"exercise": exercise, "status": "error", "error": str(exc)}
            failed |= report.get("status") != "graded"
            click.echo(json.dumps(report) if as_json else summary(path, report))
    sys.exit(1 if failed else 0)


@main.command("exercises")
@click.option("--json", "as_json", is_flag=True)
@click.option("--lang", type=LANGS, default="en", show_default=True)
def list_exercises(as_json: bool, lang: str) -> None:
    """List the exercises."""
    catalogue = _catalogue()
    if as_json:
        click.echo(json.dumps([{"slug": e.slug, "title": e.title, "section": e.section,
                                "deadline": e.deadline.at.isoformat() if e.deadline.at else None,
                                "deadline_policy": e.deadline.policy}
                               for e in catalogue.values()]))
        return
    for e in catalogue.values():
        click.echo(f"{e.slug:28} {e.section:10} {e.title[lang]}")


@main.group("exercise")
def exercise_group() -> None:
    """Work on exercises."""


exercise_group.add_command(exercises_sync)


@exercise_group.command("check")
@click.argument("slugs", nargs=-1)
@click.option("--seed", type=int, help="Fix the hidden inputs (default: fresh every run).")
def check_exercises(slugs: tuple[str, ...], seed: int | None) -> None:
    """Grade each reference (full marks) and mutant (must lose points with its code)."""
    infos = [_exercise(s) for s in slugs] if slugs else list(_catalogue().values())
    problems = []
    with tempfile.TemporaryDirectory(prefix="hpcgrade-check-") as scratch, \
            _harness(None, scratch) as harness:
        for info in infos:
            for problem in self_check(harness, info, seed):
                problems.append(f"{info.slug}: {problem}")
                click.echo(f"FAIL {info.slug}: {problem}")
            click.echo(f"{'ok  ' if not any(p.startswith(info.slug + ':') for p in problems) else 'FAIL'}"
                       f" {info.slug} (reference + {len(info.mutants)} mutants)")
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s)")


def self_check(harness: HarnessProcess, info: ExerciseInfo, seed: int | None) -> list[str]:
    problems = []
    report = harness.grade(job_for(info, info.path / "reference.py", seed=seed))
    if report.get("status") != "graded" or report["score"] != report["max_score"]:
        failing = [c["name"] + ": " + c["message"] for c in report.get("checks", []) if not c["passed"]]
        problems.append(f"reference scored {report.get('score')}/{report.get('max_score')}: "
                        f"{report.get('error') or failing}")
    for name, code in info.mutants.items():
        report = harness.grade(job_for(info, info.path / "mutants" / f"{name}.py", seed=seed))
        codes = {d["code"] for c in report.get("checks", []) for d in c["diagnostics"]}
        if report.get("status") != "graded":
            problems.append(f"mutant {name}: grader error {report.get('error')}")
        elif report["score"] >= report["max_score"]:
            problems.append(f"mutant {name} scored full marks")
        elif code not in codes:
            problems.append(f"mutant {name} lost points but with {sorted(codes)}, not {code}")
    return problems
