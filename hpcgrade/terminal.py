"""A student's `hpcgrade`: `login`, `my-courses`, `starter`, `check` and `submit`, the JSON API and
the visible checks from a terminal. The course venv's `hpcgrade` is this group (`main`, the
hpcgrade-client distribution's console script); the service's own `hpcgrade`
(worker/cli/main.py) has these commands beside the service's.

The requests are hpcgrade/service.py's (the client the Jupyter extension uses too: where the
server and the token come from, the client file, retries, waiting for a grade); here are the
terminal's words, its output (--json, the progress line, the summary) and one exit status for
each way a command can end (EXIT_STATUSES), so that a script can tell them apart.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import click

from hpcgrade import client_file, service
from hpcgrade.service import (
    Advice,
    Service,
    ServiceError,
    course_and_exercise,
    listed_courses,
    log_in,
)
from hpcgrade.summary import has_grade, summary, translator
from server.core.catalogue import PUBLIC_FILES

LANGS = click.Choice(["en", "es"])
COURSE_OPTION = click.option(
    "--course",
    help="The exercise's course, where it is in several of yours (or "
    "name it as COURSE/EXERCISE); `hpcgrade my-courses` lists them.",
)
SERVER_OPTION = click.option(
    "--server", help="The portal's URL (default: HPCGRADE_SERVER or the client file)."
)
GRADED, NO_GRADE, NOT_LOGGED_IN, REFUSED, TIMED_OUT, UNREACHABLE = range(6)
STOPPED = 130  # a shell's own status for a command that Ctrl-C (SIGINT) ended
# \b keeps click from joining the lines of the table in --help
EXIT_STATUSES = f"""\b
Exit status:
  {GRADED}  graded (whatever the score)
  {NO_GRADE}  no grade: the grader failed, or the instructors stopped the grading
  {NOT_LOGGED_IN}  not logged in (no token, or a wrong or expired one), or bad arguments
  {REFUSED}  the server refused the file (the message says why: size, syntax, attempts, deadline…)
  {TIMED_OUT}  timed out: no grade within --timeout (the submission stays queued)
  {UNREACHABLE}  the server could not be reached, or failed
  {STOPPED}  stopped with Ctrl-C (a submission already sent is still graded)"""
IN_A_TERMINAL = Advice(
    not_logged_in="not logged in: run `hpcgrade login --server URL` once (or set "
    "HPCGRADE_SERVER and HPCGRADE_TOKEN)",
    saved_token_refused="{reason}\nYour saved token is no longer valid (revoked or expired): "
    "run `hpcgrade login` again",
    environment_token_refused="{reason}\nThe token in HPCGRADE_TOKEN is not valid (revoked, "
    "expired or mistyped): set a new one, or unset it and run "
    "`hpcgrade login`",
    name_a_course="Name one: COURSE/EXERCISE, or --course COURSE, or set HPCGRADE_CLIENT_COURSE for all "
    "your commands (`hpcgrade my-courses` lists your courses)",
)


class NotLoggedIn(click.ClickException):
    exit_code = NOT_LOGGED_IN


class Refused(click.ClickException):
    exit_code = REFUSED


class Unreachable(click.ClickException):
    exit_code = UNREACHABLE


class Stopped(click.ClickException):
    """Ctrl-C: said in a line, without click's "Aborted!" (its status, 1, is "no grade") or
    Python's traceback."""

    exit_code = STOPPED

    def show(self, file=None) -> None:
        click.echo(f"\n{self.message}", err=True)


def named(exercise: str, course: str | None) -> tuple[str | None, str]:
    """(course or None, exercise) of a command's [COURSE/]EXERCISE and --course, where
    HPCGRADE_CLIENT_COURSE names the course of the user's commands that name none."""
    return course_and_exercise(exercise, course, os.environ.get("HPCGRADE_CLIENT_COURSE") or None)


def ended(exc: ServiceError | ValueError) -> click.ClickException:
    """The command's end, with its exit status, for a request that failed (ValueError: a client
    file that cannot be read)."""
    if isinstance(exc, ValueError):
        return NotLoggedIn(str(exc))
    endings = {service.NOT_LOGGED_IN: NotLoggedIn, service.REFUSED: Refused}
    return endings.get(exc.kind, Unreachable)(str(exc))


@click.command(
    epilog=f"""\b
Exit status: {GRADED} logged in; {NOT_LOGGED_IN} wrong username or password, or bad arguments;
{REFUSED} refused (e.g. too many tries); {UNREACHABLE} the server could not be reached."""
)
@click.option("--server", help="The portal's URL, e.g. https://grader.uni.es")
@click.option("--username", prompt=True)
@click.password_option(confirmation_prompt=False)
def login(server: str | None, username: str, password: str) -> None:
    """Get a token for `hpcgrade submit` and keep it in the client file."""
    try:
        server = (server or client_file.default_server() or "").rstrip("/")
        if not server:
            raise click.UsageError(
                "which server? give --server URL, set HPCGRADE_SERVER, "
                "or run `hpcgrade login --server URL` once"
            )
        answer = log_in(server, username, password)
        click.echo(
            f"logged in to {server} as {answer['username']}; token kept in "
            f"{client_file.path()} (valid until {answer.get('expires_at', '?')})"
        )
        courses = Service(server, answer["token"], IN_A_TERMINAL).courses()
    except (ServiceError, ValueError) as exc:
        raise ended(exc) from None
    except KeyboardInterrupt:
        raise Stopped("stopped") from None
    click.echo(f"your courses:\n{listed_courses(courses)}")


@click.command(
    "my-courses",
    epilog=f"""\b
Exit status: {GRADED} listed; {NOT_LOGGED_IN} not logged in; {UNREACHABLE} the server could not
be reached.""",
)
@SERVER_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print the courses as JSON.")
@click.option("--lang", type=LANGS, default="en", show_default=True, help="The titles' language.")
def my_courses(server: str | None, as_json: bool, lang: str) -> None:
    """List your courses and your role in each: an exercise in several of them is named
    COURSE/EXERCISE (or with --course) to `hpcgrade submit` and `hpcgrade check`."""
    try:
        courses = Service(server, advice=IN_A_TERMINAL).courses()
    except (ServiceError, ValueError) as exc:
        raise ended(exc) from None
    click.echo(json.dumps(courses) if as_json else listed_courses(courses, lang))


def _progress(status: dict, seconds: float, _: Callable[[str], str]) -> str:
    """ "queued · position in queue: 2 · 5 s", in the language of `_` (a gettext)."""
    translate = _  # the state's name is a message of the catalogue, not one to extract here
    state = translate(status["status"])
    if status["status"] == "queued" and status.get("queue_position"):
        state += f" · {_('position in queue')}: {status['queue_position']}"
    return f"{state} · {seconds:.0f} s"


def styled_output() -> bool:
    """Bold and colour on a terminal, unless NO_COLOR asks for none (https://no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def _plain(told: object, name: str) -> str:
    """The file name the server told for one of an exercise's public files, where it is a plain
    Python file's name; otherwise the file's own (a forged answer names no path)."""
    return (
        told if isinstance(told, str) and re.fullmatch(r"\w[\w.-]*\.py", told, re.ASCII) else name
    )


@click.command(epilog=EXIT_STATUSES)
@click.argument("exercise")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@COURSE_OPTION
@SERVER_OPTION
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the grade.")
@click.option(
    "--timeout",
    default=600,
    show_default=True,
    type=click.IntRange(1),
    help="Seconds to wait for the grade.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--lang", type=LANGS, default="en", show_default=True)
def submit(
    exercise: str,
    file: Path,
    course: str | None,
    server: str | None,
    wait: bool,
    timeout: int,
    as_json: bool,
    lang: str,
) -> None:
    """Submit FILE (.py or .ipynb) for EXERCISE ([COURSE/]EXERCISE: the course, where the
    exercise is in several of yours) and wait for its grade; prints the address of the
    submission's page, and the result."""
    _ = translator(lang).gettext
    page = None
    try:
        course, exercise = named(exercise, course)
        api = Service(server, advice=IN_A_TERMINAL)
        created = api.submit(exercise, file.name, file.read_bytes(), lang, course)
        page = api.page(created)
        click.echo(
            _("submitted %(file)s for %(exercise)s: %(url)s")
            % {"file": file.name, "exercise": f"{created['course']}/{exercise}", "url": page},
            err=True,
        )
        if not wait:
            click.echo(json.dumps(dict(created, page=page)) if as_json else page)
            return
        status = _wait_for_grade(api, created, lang, timeout, _)
    except (ServiceError, ValueError) as exc:
        raise ended(exc) from None
    except KeyboardInterrupt:
        raise Stopped(
            _("stopped waiting; the submission is still being graded: %(url)s") % {"url": page}
            if page
            else _(
                "stopped before the server answered: the submission may have been stored; "
                "your submissions are on the exercise's page"
            )
        ) from None
    if status is None:
        click.echo(
            "\n"
            + _("no grade after %(seconds)s s; the submission stays in the queue: %(url)s")
            % {"seconds": timeout, "url": page},
            err=True,
        )
        sys.exit(TIMED_OUT)
    click.echo(
        json.dumps(dict(status, page=page))
        if as_json
        else summary(file, status, lang, styled_output())
    )
    sys.exit(GRADED if has_grade(status) else NO_GRADE)


def _wait_for_grade(
    api: Service, created: dict, lang: str, timeout: int, _: Callable[[str], str]
) -> dict | None:
    """The grade, with a progress line on stderr: rewritten in place on a terminal, otherwise
    a line for each new state or place in the queue."""
    live, shown = sys.stderr.isatty(), ""

    def progress(status: dict, seconds: float) -> None:
        nonlocal shown
        line = _progress(status, seconds, _)
        if live:
            click.echo(f"\r{line:<40}", err=True, nl=False)
        elif line.rsplit(" · ", 1)[0] != shown:  # a new state or place, not only a new second
            click.echo(line, err=True)
        shown = line.rsplit(" · ", 1)[0]

    status = api.wait_for_grade(created, lang, timeout, progress)
    if live and status is not None:
        click.echo("\r" + " " * 40 + "\r", err=True, nl=False)
    return status


@click.command(
    epilog=f"""\b
Exit status: {GRADED} written; {NOT_LOGGED_IN} not logged in, bad arguments, or a file there
already (--force replaces it); {REFUSED} no such exercise of yours; {UNREACHABLE} the server could
not be reached."""
)
@click.argument("exercise")
@COURSE_OPTION
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the files (default: a folder named EXERCISE here).",
)
@SERVER_OPTION
@click.option("--force", is_flag=True, help="Replace files of the same names already there.")
def starter(
    exercise: str, course: str | None, folder: Path | None, server: str | None, force: bool
) -> None:
    """Write EXERCISE's starter, its visible checks and its support code (as the exercise's page
    offers them) into a folder, to start from: then `hpcgrade check EXERCISE FILE`."""
    try:
        course, exercise = named(exercise, course)
        published = Service(server, advice=IN_A_TERMINAL).get(
            f"/api/v1/exercises/{exercise}/files", **({"course": course} if course else {})
        )
    except (ServiceError, ValueError) as exc:
        raise ended(exc) from None
    except KeyboardInterrupt:
        raise Stopped("stopped: nothing was written") from None
    files, names = published.get("files"), published.get("names") or {}
    if not isinstance(files, dict) or not isinstance(names, dict):
        raise Unreachable(f"the server sent no files for {exercise}: is it an hpcgrade server?")
    # what a student may have, named as the portal names it; never a path the answer chose
    shown = {name: _plain(names.get(name), name) for name in PUBLIC_FILES}
    written = {
        shown[name]: text
        for name, text in files.items()
        if name in PUBLIC_FILES and isinstance(text, str)
    }
    folder = folder or Path(exercise)
    there = sorted(name for name in written if (folder / name).exists())
    if there and not force:
        raise NotLoggedIn(
            f"{', '.join(str(folder / name) for name in there)} already there: your work is kept "
            "(--force replaces it, or --dir another folder)"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in written.items():
            (folder / name).write_text(text)
    except OSError as exc:
        raise NotLoggedIn(f"cannot write into {folder}: {exc.strerror or exc}") from None
    start = folder / shown["starter.py"]
    click.echo(f"wrote {', '.join(str(folder / name) for name in written)}")
    if start.name in written:
        where = f"{published.get('course', course)}/{exercise}" if course else exercise
        click.echo(f"edit {start}, then: hpcgrade check {where} {start}")


@click.command(epilog=EXIT_STATUSES)
@click.argument("exercise")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@COURSE_OPTION
@click.option("--lang", type=LANGS, default="en", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def check(exercise: str, file: Path, course: str | None, lang: str, as_json: bool) -> None:
    """Run the visible checks of EXERCISE ([COURSE/]EXERCISE) on FILE (.py or .ipynb) here, in
    the grader's sandbox: no attempt is used, and the hidden checks of the grade are others. The
    exercise's public files come from the server you logged in to (or, when no course is named,
    the local exercises folder, when it has them)."""
    from hpcgrade.visible import run_visible_checks
    from worker.harness.runner import HarnessFailed

    try:
        course, exercise = named(exercise, course)
        report = run_visible_checks(
            exercise, file, lang, course=course, advice=IN_A_TERMINAL, submitted=file
        )
    except ServiceError as exc:
        raise ended(exc) from None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    except HarnessFailed as exc:
        click.echo(f"the checks could not run: {exc}", err=True)
        sys.exit(NO_GRADE)
    except KeyboardInterrupt:
        raise Stopped("stopped: the checks did not finish (no attempt was used)") from None
    click.echo(json.dumps(report) if as_json else summary(file, report, lang, styled_output()))
    sys.exit(GRADED if report.get("status") == "graded" else NO_GRADE)


@click.group(
    commands=[login, my_courses, starter, check, submit],
    epilog="The service's own commands come with the service's install (docs/operations.md).",
)
def main() -> None:
    """A student's hpcgrade, against the course's server: log in, fetch an exercise's starter,
    run its visible checks here, submit and read the grade."""
