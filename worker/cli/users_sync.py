"""`hpcgrade users sync`: enrolments from the directory's groups, now (beat runs it every
LDAP_SYNC_MINUTES as the task hpcgrade.users_sync)."""

from __future__ import annotations

import click
from sqlalchemy.exc import OperationalError

from server.core.config import ConfigError, load_settings
from server.core.courses import CourseError, find_course
from server.core.db import Database
from server.core.ldap_directory import DirectoryUnavailable
from server.core.ldap_sync import describe, sync_enrolments


@click.command("sync")
@click.option(
    "--course",
    "course_slug",
    metavar="SLUG",
    help="Only this course's groups (default: every open course's).",
)
def users_sync(course_slug: str | None) -> None:
    """Read the members of the directory groups courses name (`directory_groups`): accounts
    for those who never logged in, enrolments as their groups say, and directory accounts in
    none of them any more out of the courses their groups had put them in. Prints each change:
    course: user old role -> new role ("-": none)."""
    try:
        settings = load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    if not settings.ldap_url:
        raise click.ClickException("LDAP_URL is not set: there is no directory to read")
    database = Database(settings.database_url)
    try:
        with database.sessions.begin() as session:
            course = find_course(session, course_slug) if course_slug else None
            report = sync_enrolments(session, settings, course)
    except (CourseError, DirectoryUnavailable) as exc:
        raise click.ClickException(f"nothing changed: {exc}") from None
    except OperationalError as exc:
        raise click.ClickException(f"database error: {exc.orig}") from None
    finally:
        database.dispose()
    for change in report.changes:
        click.echo(describe(change))
    for username, why in report.refused:
        click.echo(f"no account for {username}: {why}", err=True)
    for slug, groups in report.unread:
        click.echo(
            f"{slug} left as it is: the directory gave no members of "
            f"{', '.join(groups)} (missing, renamed, empty or hidden)",
            err=True,
        )
    click.echo(f"{len(report.changes)} change{'s' if len(report.changes) != 1 else ''}", err=True)
