"""`hpcgrade courses …`: an admin's courses from the command line: created, edited, copied into
a new edition (settings, staff and exercises; no student, no submission), archived, listed.

Every value is checked by server/core/courses.py, as the admin's pages are; a wrong one stops
the command with its message and stores nothing."""

from __future__ import annotations

import functools
import json
import shlex
from typing import Any, Callable

import click
from sqlalchemy import select

from server.core.catalogue import DEADLINE_POLICIES, ExerciseConfigError
from server.core.course_admin import SLURM_KEYS, counts, pairs, slurm_text, slurm_with, sync_course
from server.core.courses import (
    CourseError,
    archive_course,
    copy_course,
    course_catalogue,
    course_settings,
    create_course,
    edit_course,
    exercises_path,
    find_course,
    job_names,
    open_courses,
)
from server.core.models import Course
from worker.cli.admin import _in_transaction, catalogue

# option → the course setting it sets
OPTIONS = {
    "title_en": "title_en",
    "title_es": "title_es",
    "edition": "edition",
    "timezone": "timezone",
    "exercises": "exercises_dir",
    "python": "course_python",
    "late_policy": "deadline_policy",
    "penalty_per_day": "penalty_per_day",
    "job_name": "job_name",
    "job_comment": "job_comment",
    "wckey": "wckey",
    "ta_accommodations": "tas_grant_accommodations",
}


def in_transaction(action: Callable[[Any], Any]) -> Any:
    """`action(session)` in one transaction; a wrong value (a CourseError, which
    `_in_transaction` words) or a broken exercise stores nothing and ends the command with its
    message."""
    try:
        return _in_transaction(action)
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


def setting_options(command):
    """The options of a course's settings; an empty value resets one to the service's default."""
    options = [
        click.option("--title-en", help="The title in English."),
        click.option("--title-es", help="The title in Spanish (default: the English one)."),
        click.option("--edition", help="The edition, or term: 2026, 2026-spring."),
        click.option(
            "--timezone",
            help="Its deadlines' time zone (e.g. Europe/Madrid; default: the service's TIMEZONE).",
        ),
        click.option(
            "--exercises",
            metavar="DIR",
            help="Its exercises' folder or git checkout (default: the service's exercises folder).",
        ),
        click.option(
            "--python",
            metavar="PATH",
            help="The course venv's interpreter (default: COURSE_PYTHON).",
        ),
        click.option(
            "--slurm",
            "slurm",
            multiple=True,
            metavar="KEY=VALUE",
            help=f"A Slurm setting over the service's SLURM_* ones, repeatable; KEY is "
            f"one of {', '.join(SLURM_KEYS)}; KEY= takes it out.",
        ),
        click.option(
            "--late-policy",
            metavar="|".join(DEADLINE_POLICIES),
            help="The late policy of an exercise whose [deadline] names none.",
        ),
        click.option("--penalty-per-day", metavar="F", help="Its penalty, a fraction per day."),
        click.option("--job-name", help="Its Slurm jobs' name (default: hpcgrade-SLUG)."),
        click.option("--job-comment", help='Its jobs\' --comment (default: "hpcgrade SLUG").'),
        click.option("--wckey", help="Its jobs' --wckey (default: SLUG)."),
        click.option(
            "--ta-accommodations",
            type=click.Choice(["yes", "no"]),
            help="Whether its teaching assistants may give accommodations too (default: no, "
            "its instructors only).",
        ),
        click.option(
            "--groups",
            "groups",
            multiple=True,
            metavar="ROLE=GROUP,…",
            help="The directory's (or single sign-on's) groups whose members it "
            "enrols as ROLE, repeatable; ROLE= enrols no one that way.",
        ),
    ]
    return functools.reduce(lambda wrapped, option: option(wrapped), reversed(options), command)


def settings_given(
    course: Course | None, slurm: tuple[str, ...], groups: tuple[str, ...], **given: str | None
) -> dict:
    """The settings the options name (an option left out is not changed)."""
    values = {OPTIONS[name]: value for name, value in given.items() if value is not None}
    if slurm:
        values["slurm"] = slurm_with(course.slurm or {} if course else {}, pairs(slurm))
    if groups:
        values["directory_groups"] = {
            **(course.directory_groups if course else {}),
            **{
                role.strip(): [name for name in names.split(",") if name.strip()]
                for role, _equals, names in (pair.partition("=") for pair in groups)
            },
        }
    return values


def synced(session, course: Course) -> str:
    """The course's exercises in step with its folder; what changed, in words."""
    number, changes = sync_course(session, course)
    said = [f"{kind}: {', '.join(slugs)}" for kind, slugs in changes.items() if slugs]
    return "; ".join([f"{number} exercises in step", *said])


@click.group("courses")
def courses_group() -> None:
    """Courses: each with its exercises, course venv, Slurm settings, staff and students."""


@courses_group.command("create")
@click.argument("slug")
@setting_options
def create(slug: str, slurm: tuple[str, ...], groups: tuple[str, ...], **given: str | None) -> None:
    """Add course SLUG (lower-case letters, digits and dashes) and sync its exercises."""

    def action(session):
        course = create_course(session, slug, **settings_given(None, slurm, groups, **given))
        return synced(session, course)

    click.echo(f"created course {slug}: {in_transaction(action)}")


@courses_group.command("edit")
@click.argument("slug")
@setting_options
def edit(slug: str, slurm: tuple[str, ...], groups: tuple[str, ...], **given: str | None) -> None:
    """Change course SLUG's settings (an empty value: the service's default again) and sync
    its exercises, whose default late policy may have changed."""

    def action(session):
        course = find_course(session, slug)
        refuse_archived(course)
        edit_course(session, course, **settings_given(course, slurm, groups, **given))
        return synced(session, course)

    click.echo(f"course {slug} changed: {in_transaction(action)}")


def refuse_archived(course: Course) -> None:
    if course.archived_at is not None:
        raise CourseError(
            f"course {course.slug} is archived, read-only: "
            f"`hpcgrade courses archive {course.slug} --undo` opens it again"
        )


@courses_group.command("copy")
@click.argument("slug")
@click.argument("new_slug")
@setting_options
def copy(
    slug: str, new_slug: str, slurm: tuple[str, ...], groups: tuple[str, ...], **given: str | None
) -> None:
    """Copy course SLUG into a new edition NEW_SLUG (give its --edition): its settings (the
    options change them), its staff and its exercises; no student and no submission."""
    if not given.get("edition"):
        raise click.UsageError("give the new edition: --edition 2027")

    def action(session):
        course = find_course(session, slug)
        copied = copy_course(
            session, course, new_slug, **settings_given(course, slurm, groups, **given)
        )
        said = synced(session, copied)
        return f"{course_counts(counts(session), copied)['staff']} staff, {said}"

    click.echo(f"copied course {slug} into {new_slug}: {in_transaction(action)}")


@courses_group.command("archive")
@click.argument("slug")
@click.option("--undo", is_flag=True, help="Open the archived course again.")
def archive(slug: str, undo: bool) -> None:
    """Make course SLUG read-only: its staff and students still see it, nobody submits or
    changes anything in it."""
    in_transaction(lambda session: archive_course(find_course(session, slug), not undo))
    click.echo(f"course {slug} {'open again' if undo else 'archived'}")


@courses_group.command("list")
@click.option(
    "--json", "as_json", is_flag=True, help="One JSON list, a course's settings and counts each."
)
def list_courses(as_json: bool) -> None:
    """Every course: slug, edition, students, staff, exercises, archived or not."""

    def listed(session):
        found = counts(session)
        return [
            {**course_settings(course), **course_counts(found, course)}
            for course in session.scalars(
                select(Course).order_by(Course.archived_at.is_not(None), Course.slug)
            )
        ]

    rows = in_transaction(listed)
    if as_json:
        click.echo(json.dumps(rows))
        return
    click.echo(f"{'slug':24} {'edition':12} {'students':>8} {'staff':>5} {'exercises':>9}  title")
    for row in rows:
        click.echo(
            f"{row['slug']:24} {row['edition'] or '-':12} {row['students']:>8} "
            f"{row['staff']:>5} {row['exercises']:>9}  {row['title_en']}"
            f"{' (archived)' if row['archived'] else ''}"
        )


def course_counts(found: dict, course: Course) -> dict[str, int]:
    """How many students, staff (TAs and instructors) and active exercises the course has."""
    return {key: found.get(course.id, {}).get(key, 0) for key in ("students", "staff", "exercises")}


@courses_group.command("show")
@click.argument("slug")
def show(slug: str) -> None:
    """Course SLUG's settings: its exercises folder, job names and Slurm table as its runs
    get them."""

    def settings(session):
        course = find_course(session, slug)
        named = dict(zip(("job_name", "job_comment", "wckey"), job_names(course)))
        return {
            **course_settings(course),
            **named,
            "exercises_dir": str(exercises_path(course)),
            "slurm": slurm_text(course.slurm or {}),
            **course_counts(counts(session), course),
        }

    for key, value in in_transaction(settings).items():
        if key == "slurm":
            value = (
                " ".join(f"{k}={shlex.quote(v)}" for k, v in value.items())
                or "(the SLURM_* settings)"
            )
        click.echo(f"{key:16} {'(the service default)' if value is None else value}")


def course_folder(slug: str):
    """Course SLUG's exercises folder (for `hpcgrade exercise new/check --course`)."""
    return in_transaction(lambda session: exercises_path(find_course(session, slug)))


def course_exercises(slug: str) -> dict:
    """Course SLUG's exercises as its folder holds them (for `hpcgrade exercises --course`)."""
    return in_transaction(lambda session: course_catalogue(find_course(session, slug)))


@click.command("sync")
@click.option(
    "--course", "course_slug", metavar="SLUG", help="Only this course (default: every open course)."
)
def exercises_sync(course_slug: str | None) -> None:
    """Bring the database's exercises in step with each course's exercises folder; a broken
    exercise stops it, with nothing synced."""

    def action(session):
        courses = [find_course(session, course_slug)] if course_slug else open_courses(session)
        if not courses:
            raise CourseError("no open course: add one with `hpcgrade courses create SLUG`")
        for course in courses:
            refuse_archived(course)
        return [(course.slug, synced(session, course)) for course in courses]

    for slug, changes in in_transaction(action):
        click.echo(f"{slug}: {changes}")


@click.command("exercises")
@click.option("--json", "as_json", is_flag=True)
@click.option("--lang", type=click.Choice(["en", "es"]), default="en", show_default=True)
@click.option(
    "--course",
    "course_slug",
    metavar="SLUG",
    help="Course SLUG's exercises (default: the service's exercises folder).",
)
def list_exercises(as_json: bool, lang: str, course_slug: str | None) -> None:
    """List the exercises of a folder: the service's, or a course's."""
    exercises = course_exercises(course_slug) if course_slug else catalogue()
    if as_json:
        click.echo(
            json.dumps(
                [
                    {
                        "slug": e.slug,
                        "title": e.title,
                        "section": e.section,
                        "deadline": e.deadline.at.isoformat() if e.deadline.at else None,
                        "deadline_policy": e.deadline.policy,
                    }
                    for e in exercises.values()
                ]
            )
        )
        return
    for e in exercises.values():
        click.echo(f"{e.slug:28} {e.section:10} {e.title[lang]}")
