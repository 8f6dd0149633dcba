"""`hpcgrade db …`, `users …`, `tokens …`, `exercises` and `exercise sync`: deploy steps,
accounts, API tokens, exercises."""

from __future__ import annotations

import getpass
from collections.abc import Callable
from pathlib import Path

import click
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from server.core import migrate
from server.core.catalogue import ExerciseConfigError, load_catalogue
from server.core.config import ConfigError, Settings, app_settings, load_settings
from server.core.configuration_doc import markdown
from server.core.courses import COURSE_ROLES, CourseError, enrol, find_course
from server.core.db import Database
from server.core.ldap_directory import DirectoryUnavailable, known_usernames
from server.core.models import AuthSource, Enrolment, User, utcnow
from server.core.roster import decode_roster, import_roster
from server.core.tokens import TokenError, listed, revoke
from server.core.users import (
    ROLES,
    UserError,
    add_or_enrol,
    add_user,
    only_course,
    set_password,
)
from worker.cli.users_sync import users_sync


def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _database_url() -> str:
    return _settings().database_url


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


users_group.add_command(users_sync)


# which database a command uses, said where it has none or none of the service's tables
WHICH_DATABASE = (
    "`hpcgrade db upgrade` makes it; the demo's (scripts/run) is another: name its settings, "
    "HPCGRADE_CONFIG=instance/demo/hpcgrade.toml hpcgrade …"
)


def _in_transaction(action, database: Database | None = None):
    if database is None:
        url = _database_url()
        # SQLite would make an empty file there, which the next command takes for a database
        if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
            raise click.ClickException(
                f"no database at {url.removeprefix('sqlite:///')}: {WHICH_DATABASE}"
            )
        database = Database(url)
    try:
        with database.sessions.begin() as session:
            return action(session)
    except (UserError, TokenError, CourseError) as exc:
        raise click.ClickException(str(exc)) from None
    except OperationalError as exc:
        raise click.ClickException(
            f"database error: {exc.orig} (a database without the service's tables? "
            f"{WHICH_DATABASE})"
        ) from None
    finally:
        database.dispose()


def _course(session, slug: str | None):
    """The course --course names, else the service's one open course."""
    if slug is not None:
        return find_course(session, slug)
    try:
        return only_course(session)
    except UserError as exc:
        raise UserError(f"{exc} (with --course)") from None


COURSE_OPTION = click.option(
    "--course",
    "course_slug",
    metavar="SLUG",
    help="The course (default: the service's one open course).",
)


@users_group.command("add")
@click.argument("username")
@click.option("--given-name", default="", help="The given name(s).")
@click.option("--family-name", default="", help="The family name(s), which lists sort by.")
@click.option(
    "--name",
    default="",
    help="The full name, where the two are not given (split as a guess: Given Family Family).",
)
@click.option("--email", required=True)
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default="student",
    show_default=True,
    help="The role in the course; admin is global (every course).",
)
@COURSE_OPTION
@click.option(
    "--password",
    envvar="HPCGRADE_NEW_PASSWORD",
    help="Default: asked for (or HPCGRADE_NEW_PASSWORD).",
)
def users_add(
    username: str,
    given_name: str,
    family_name: str,
    name: str,
    email: str,
    role: str,
    course_slug: str | None,
    password: str | None,
) -> None:
    """Add one account; with --course, an existing account is enrolled in that course
    instead."""
    names = {"given_name": given_name, "family_name": family_name}
    if not (name or given_name or family_name):
        raise click.UsageError("give the name: --given-name and --family-name, or --name")
    exists = _in_transaction(
        lambda s: s.scalar(select(User.id).where(User.username == username)) is not None
    )
    if exists and course_slug is None:
        raise click.ClickException(
            f"user {username} already exists; to enrol it in a course, "
            f"name the course with --course"
        )
    source = AuthSource.local
    if not exists and role != "admin" and _directory(_settings())([username]):
        source, password = AuthSource.ldap, None  # one of the directory's people: its password
    elif not exists:
        password = password or getpass.getpass(f"password for {username}: ")

    def add(session) -> str:
        if role == "admin":
            if course_slug is not None:
                raise UserError("an admin is in every course: leave --course out")
            add_user(session, username, name, email, role, password, **names)
            return f"added {username} (admin)"
        course = _course(session, course_slug)
        created = add_or_enrol(
            session,
            username,
            name,
            email,
            role,
            password,
            course=course,
            auth_source=source,
            **names,
        )[1]
        return (
            f"{'added' if created else 'enrolled'} {username} ({role} in {course.slug}"
            f"{', logs in with the directory' if created and source != AuthSource.local else ''})"
        )

    click.echo(_in_transaction(add))


@users_group.command("enrol")
@click.argument("username")
@click.option("--course", "course_slug", metavar="SLUG", required=True)
@click.option("--role", type=click.Choice(COURSE_ROLES), required=True)
def users_enrol(username: str, course_slug: str, role: str) -> None:
    """Enrol an account in a course with a role, or change its role there."""

    def change(session) -> str:
        user, course = _user(session, username), find_course(session, course_slug)
        before = session.scalar(
            select(Enrolment.role).where(
                Enrolment.user_id == user.id, Enrolment.course_id == course.id
            )
        )
        enrol(session, user, course, role)
        if before is None:
            return f"enrolled {username} in {course.slug} as {role}"
        return f"{username} in {course.slug}: {before} -> {role}"

    click.echo(_in_transaction(change))


@users_group.command("import")
@click.argument("roster", type=click.File("rb"))
@COURSE_OPTION
@click.option(
    "--lang",
    type=click.Choice(["en", "es"]),
    default="en",
    show_default=True,
    help="The language of the messages and of the mails.",
)
def users_import(roster, course_slug: str | None, lang: str) -> None:
    """Bring a CSV roster into a course, its columns guessed from its header as the roster page
    guesses them (username, given_name, family_name or name, email, role; Spanish headers and
    roles too, commas or semicolons), or nothing of it where a line is wrong: new accounts are
    added, existing ones enrolled with their row's role, the course's own left as they are. An
    email address on two rows, or another account's, is named (and imported).

    Prints username,link for each new account: the link sets its password, once, within
    SET_PASSWORD_LINK_DAYS (the roster page shows it again until then). Where mail is set up
    (MAIL_SERVER), each account is mailed its link too."""
    # not at import, as the app below: the other commands need no Flask
    from flask_babel import force_locale

    from server.core.links import make_link

    app = _app()
    base_url = app_settings(app).public_url or ""

    def bring_in(session):
        created, plan = import_roster(
            session,
            decode_roster(roster.read()),
            _course(session, course_slug),
            _directory(app_settings(app)),
        )
        local = [user for user in created if user.auth_source == AuthSource.local.value]
        return (
            [(user.id, user.username, make_link(user, base_url)) for user in local],
            [user.username for user in created if user not in local],
            [row.username for row in plan.enrol],
            [row.username for row in plan.existing],
            plan.warnings,
        )

    with app.app_context(), force_locale(lang):
        created, directory_people, enrolled, kept, warnings = _in_transaction(
            bring_in, app.extensions["hpcgrade.db"]
        )
        click.echo("username,link")
        for _id, username, link in created:
            click.echo(f"{username},{link}")
        if directory_people:
            click.echo(
                "the directory's people, who log in with its password (no link): "
                f"{', '.join(directory_people)}",
                err=True,
            )
        if enrolled:
            click.echo(f"existing accounts enrolled: {', '.join(enrolled)}", err=True)
        if kept:
            click.echo(f"in the course already, left as they are: {', '.join(kept)}", err=True)
        for line, warning in warnings:
            click.echo(f"line {line}: {warning}", err=True)
        if not base_url and created:
            click.echo(
                "HPCGRADE_PUBLIC_URL is not set: each link is a path on the portal; put "
                "the portal's address before it",
                err=True,
            )
        _mail_links(app, [user_id for user_id, _username, _link in created], base_url, lang)


def _directory(settings: Settings) -> Callable[[list[str]], set[str]]:
    """Which usernames the centre's directory knows (none while LDAP_URL is unset)."""

    def known(usernames: list[str]) -> set[str]:
        try:
            return known_usernames(settings, usernames)
        except DirectoryUnavailable as away:
            raise click.ClickException(
                f"the directory cannot be reached to tell its people "
                f"from guests ({away}): nothing was added"
            ) from None

    return known


def _app():
    """The portal's app (its settings, database and languages), for the links and mails."""
    from server.web.app import create_app

    try:
        return create_app()
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None


def _mail_links(app, user_ids: list[int], base_url: str, lang: str) -> None:
    """Mail each new account its link, where mail is set up; say on stderr how it went (the
    accounts stand whatever happens)."""
    from server.core.mail import MailAway, mail_configured, send_links

    if not mail_configured() or not user_ids:
        return
    if not base_url:
        click.echo(
            "links not mailed: a mail needs the whole link (set HPCGRADE_PUBLIC_URL)", err=True
        )
        return
    with app.extensions["hpcgrade.db"].sessions() as session:
        try:
            refused = send_links(session, user_ids, base_url, lang)
        except MailAway as away:
            click.echo(
                f"links not mailed to {len(away.left)} of the {len(user_ids)} accounts: {away}",
                err=True,
            )
            return
        finally:
            session.commit()  # what went out, counted
        mailed = len(user_ids) - len(refused)
        click.echo(
            f"{mailed} link{'s' if mailed != 1 else ''} mailed"
            + (
                "; not mailed: "
                + ", ".join(
                    f"{user.username} <{user.email}> ({answer})" for user, answer in refused
                )
                if refused
                else ""
            ),
            err=True,
        )


@users_group.command("password")
@click.argument("username")
@click.option(
    "--password",
    envvar="HPCGRADE_NEW_PASSWORD",
    help="Default: asked for, twice (or HPCGRADE_NEW_PASSWORD).",
)
def users_password(username: str, password: str | None) -> None:
    """Set an account's password; every session of the account ends and its API tokens are
    revoked."""
    password = password or click.prompt(
        f"new password for {username}", hide_input=True, confirmation_prompt=True
    )
    revoked = _in_transaction(lambda s: set_password(s, _user(s, username), password))
    click.echo(
        f"password of {username} set; its sessions have ended and its {revoked} API "
        f"token(s) were revoked"
    )


def _user(session, username: str) -> User:
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        raise UserError(f"no user {username}")
    return user


@click.group("tokens")
def tokens_group() -> None:
    """API tokens (what `hpcgrade login` gets)."""


@tokens_group.command("list")
@click.option("--user", "username", help="Only this user's tokens.")
def tokens_list(username: str | None) -> None:
    """List tokens: id, user, label, created, last used, expires."""

    def rows(session):
        user_id = _user(session, username).id if username else None
        return [
            (t.id, t.user.username, t.label, t.created_at, t.last_used_at, t.expires_at)
            for t in listed(session, user_id)
        ]

    now = utcnow()
    click.echo(f"{'id':>6}  {'user':16} {'label':28} {'created':16} {'last used':16} expires")
    for token_id, user, label, created, used, expires in _in_transaction(rows):
        click.echo(
            f"{token_id:>6}  {user:16} {label or '-':28} {created:%Y-%m-%d %H:%M} "
            f"{f'{used:%Y-%m-%d %H:%M}' if used else 'never':16} {expires:%Y-%m-%d}"
            f"{' (expired)' if expires <= now else ''}"
        )


@tokens_group.command("revoke")
@click.argument("token_id", type=int, required=False)
@click.option("--user", "username", help="Whose tokens (with --all).")
@click.option("--all", "every", is_flag=True, help="Every token of --user.")
def tokens_revoke(token_id: int | None, username: str | None, every: bool) -> None:
    """Revoke token ID, or every token of a user (--user U --all); it stops working at once."""
    by_id = token_id is not None and username is None and not every
    if not by_id and not (token_id is None and username is not None and every):
        raise click.UsageError("give a token ID, or --user USERNAME --all")
    gone = _in_transaction(
        lambda s: (
            revoke(s, token_id=token_id) if by_id else revoke(s, user_id=_user(s, username).id)
        )
    )
    if by_id and not gone:
        raise click.ClickException(f"no token {token_id}")
    click.echo(f"revoked {gone} token(s)")


def catalogue() -> dict:
    """The exercises, or a clear refusal naming the bad one (for every command that reads them)."""
    try:
        return load_catalogue()
    except ExerciseConfigError as exc:
        raise click.ClickException(f"bad exercise: {exc}") from None


@click.command("settings")
def settings_reference() -> None:
    """Print every setting of the service (its variable, TOML key, type, default and what it
    does) as Markdown: docs/configuration.md is this output."""
    click.echo(markdown(), nl=False)
