"""`hpcgrade db …`, `users …`, `exercises` and `exercise sync`: deploy steps, accounts, exercises."""
from __future__ import annotations

import getpass
import json
from pathlib import Path

import click
from sqlalchemy.exc import OperationalError

from . import migrate
from .catalogue import ExerciseConfigError, load_catalogue
from .config import ConfigError, load_config
from .db import Database
from .exercises import sync_exercises
from .users import UserError, add_user, import_roster


def _database_url() -> str:
    try:
        return load_config()["DATABASE_URL"]
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


@click.group("db")
def db_group() -> None:
    """Database schema (Alembic migrations)."""


@db_group.command("upgrade")
@click.argument("revision", default="head")
def db_upgrade(revision: str) -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    url = _database_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        migrate.upgrade(url, revision)
    except OperationalError as exc:
        raise click.ClickException(f"cannot reach the database: {exc.orig}") from None
    click.echo(f"database at {revision}")


@db_group.command("downgrade")
@click.argument("revision")
def db_downgrade(revision: str) -> None:
    """Undo migrations down to REVISION ('base' removes every table)."""
    migrate.downgrade(_database_url(), revision)
    click.echo(f"database at {revision}")


@click.group("users")
def users_group() -> None:
    """Accounts."""


def _in_transaction(action):
    database = Database(_database_url())
    try:
        with database.sessions.begin() as session:
            return action(session)
    except UserError as exc:
        raise click.ClickException(str(exc)) from None
    except OperationalError as exc:
        raise click.ClickException(f"database error (did you run `hpcgrade db upgrade`?): "
                                   f"{exc.orig}") from None
    finally:
        database.dispose()


@users_group.command("add")
@click.argument("username")
@click.option("--name", required=True)
@click.option("--email", required=True)
@click.option("--role", type=click.Choice(["student", "instructor", "admin"]), default="student",
              show_default=True)
@click.option("--password", envvar="HPCGRADE_NEW_PASSWORD",
              help="Default: asked for (or HPCGRADE_NEW_PASSWORD).")
def users_add(username: str, name: str, email: str, role: str, password: str | None) -> None:
    """Add one account."""
    password = password or getpass.getpass(f"password for {username}: ")
    _in_transaction(lambda s: add_user(s, username, name, email, role, password))
    click.echo(f"added {username} ({role})")


@users_group.command("import")
@click.argument("roster", type=click.File("r", encoding="utf-8-sig"))
def users_import(roster) -> None:
    """Add every account of a CSV roster (username,name,email,role), or none.

    Prints username,password for each new account: hand the initial passwords out."""
    created = _in_transaction(lambda s: import_roster(s, roster.read()))
    click.echo("username,password")
    for username, password in created:
        click.echo(f"{username},{password}")


def catalogue() -> dict:
    """The exercises, or a clear refusal naming the bad one (for every command that reads them)."""
    try:
        return load_catalogue()
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


@click.command("sync")
def exercises_sync() -> None:
    """Bring the database's exercises in step with the exercises folder."""
    exercises = catalogue()
    changes = _in_transaction(lambda s: sync_exercises(s, exercises))
    for kind, slugs in changes.items():
        if slugs:
            click.echo(f"{kind}: {', '.join(slugs)}")
    click.echo(f"{len(exercises)} exercises in step")


@click.command("exercises")
@click.option("--json", "as_json", is_flag=True)
@click.option("--lang", type=click.Choice(["en", "es"]), default="en", show_default=True)
def list_exercises(as_json: bool, lang: str) -> None:
    """List the exercises."""
    exercises = catalogue()
    if as_json:
        click.echo(json.dumps([{"slug": e.slug, "title": e.title, "section": e.section,
                                "deadline": e.deadline.at.isoformat() if e.deadline.at else None,
                                "deadline_policy": e.deadline.policy}
                               for e in exercises.values()]))
        return
    for e in exercises.values():
        click.echo(f"{e.slug:28} {e.section:10} {e.title[lang]}")
