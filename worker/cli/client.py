"""`hpcgrade login` and `hpcgrade submit`: the JSON API from a terminal.

The server's URL and a token come from the environment (HPCGRADE_SERVER, HPCGRADE_TOKEN) or the
client file that `hpcgrade login` writes (HPCGRADE_CLIENT_CONFIG, by default
~/.config/hpcgrade/client.toml, readable by its owner only). Each way a command can end has its
own exit status (EXIT_STATUSES), so that a script can tell them apart.
"""
from __future__ import annotations

import json
import os
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import click
import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from hpcgrade import service
from hpcgrade.service import on_server, save_client_config, token_label

from hpcgrade.summary import summary, translator

POLL_SECONDS = 1.0
REQUEST_SECONDS = 30
RETRIES = 5
LANGS = click.Choice(["en", "es"])
GRADED, NO_GRADE, NOT_LOGGED_IN, REFUSED, TIMED_OUT, UNREACHABLE = range(6)
# \b keeps click from joining the lines of the table in --help
EXIT_STATUSES = f"""\b
Exit status:
  {GRADED}  graded (whatever the score)
  {NO_GRADE}  no grade: the grader failed, or the instructors stopped the grading
  {NOT_LOGGED_IN}  not logged in (no token, or a wrong or expired one), or bad arguments
  {REFUSED}  the server refused the file (the message says why: size, syntax, attempts, deadline…)
  {TIMED_OUT}  timed out: no grade within --timeout (the submission stays queued)
  {UNREACHABLE}  the server could not be reached, or failed"""


class NotLoggedIn(click.ClickException):
    exit_code = NOT_LOGGED_IN


class Refused(click.ClickException):
    exit_code = REFUSED


class Unreachable(click.ClickException):
    exit_code = UNREACHABLE


def read_client_config() -> dict:
    try:
        return service.read_client_config()
    except ValueError as exc:
        raise NotLoggedIn(str(exc)) from None


def _server(option: str | None) -> str:
    server = option or os.environ.get("HPCGRADE_SERVER") or read_client_config().get("server")
    if not server:
        raise click.UsageError("which server? give --server URL, set HPCGRADE_SERVER, "
                               "or run `hpcgrade login --server URL` once")
    return server.rstrip("/")


def _token() -> tuple[str, str]:
    """The token, and what to do when the server no longer takes it (logging in again does not
    help while HPCGRADE_TOKEN, which comes first, holds the old one)."""
    if os.environ.get("HPCGRADE_TOKEN"):
        return os.environ["HPCGRADE_TOKEN"], (
            "The token in HPCGRADE_TOKEN is not valid (revoked, expired or mistyped): set a new "
            "one, or unset it and run `hpcgrade login`")
    token = read_client_config().get("token")
    if not token:
        raise click.UsageError("no token: run `hpcgrade login` (or set HPCGRADE_TOKEN)")
    return token, ("Your saved token is no longer valid (revoked or expired): run "
                   "`hpcgrade login` again")


def _call(method: str, url: str, http=requests, token_refused: str | None = None,
          **kwargs) -> dict:
    """One API request; a refusal, an error or an unreachable server ends the command with its
    message and its exit status (a 401 with `token_refused`, what to do, after the server's
    reason)."""
    try:
        reply = http.request(method, url, timeout=REQUEST_SECONDS, **kwargs)
    except requests.ConnectionError:
        raise Unreachable(f"cannot connect to {url}: is the server's URL right?") from None
    except requests.Timeout:
        raise Unreachable(f"{url} did not answer within {REQUEST_SECONDS} s") from None
    except requests.RequestException as exc:
        raise Unreachable(f"{url}: {exc}") from None
    try:
        body = reply.json()
    except ValueError:
        body = {"error": f"HTTP {reply.status_code} with no JSON body"}
    error = body.get("error") or f"HTTP {reply.status_code}"
    if reply.status_code == 401:
        raise NotLoggedIn(f"{error}\n{token_refused}" if token_refused else error)
    if reply.status_code >= 500:
        raise Unreachable(error)
    if reply.status_code >= 400:
        raise Refused(error)
    return body


@click.command(epilog=f"""\b
Exit status: {GRADED} logged in; {NOT_LOGGED_IN} wrong username or password, or bad arguments;
{REFUSED} refused (e.g. too many tries); {UNREACHABLE} the server could not be reached.""")
@click.option("--server", help="The portal's URL, e.g. https://grader.uni.es")
@click.option("--username", prompt=True)
@click.password_option(confirmation_prompt=False)
def login(server: str | None, username: str, password: str) -> None:
    """Get a token for `hpcgrade submit` and keep it in the client file."""
    server = _server(server)
    body = _call("POST", f"{server}/api/v1/tokens",
                 json={"username": username, "password": password, "label": token_label()})
    path = save_client_config(server, body["token"])
    click.echo(f"logged in to {server} as {body['username']}; token kept in {path} "
               f"(valid until {body.get('expires_at', '?')})")


def _retrying() -> requests.Session:
    """Requests sent again after a lost connection, a time-out or a server error, waiting as the
    server's Retry-After says: safe for a submission, whose idempotency key goes with it."""
    retry = Retry(total=RETRIES, connect=2, backoff_factor=0.5, status_forcelist=(500, 502, 503, 504),
                  allowed_methods=None, raise_on_status=False)
    session = requests.Session()
    for scheme in ("http://", "https://"):
        session.mount(scheme, HTTPAdapter(max_retries=retry))
    return session


def _progress(status: dict, seconds: float, _: Callable[[str], str]) -> str:
    """"queued · position in queue: 2 · 5 s", in the language of `_` (a gettext)."""
    translate = _  # the state's name is a message of the catalogue, not one to extract here
    state = translate(status["status"])
    if status["status"] == "queued" and status.get("queue_position"):
        state += f" · {_('position in queue')}: {status['queue_position']}"
    return f"{state} · {seconds:.0f} s"


def styled_output() -> bool:
    """Bold and colour on a terminal, unless NO_COLOR asks for none (https://no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


@click.command(epilog=EXIT_STATUSES)
@click.argument("exercise")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--server", help="The portal's URL (default: HPCGRADE_SERVER or the client file).")
@click.option("--wait/--no-wait", default=True, show_default=True, help="Wait for the grade.")
@click.option("--timeout", default=600, show_default=True, type=click.IntRange(1),
              help="Seconds to wait for the grade.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("--lang", type=LANGS, default="en", show_default=True)
def submit(exercise: str, file: Path, server: str | None, wait: bool, timeout: int,
           as_json: bool, lang: str) -> None:
    """Submit FILE (.py or .ipynb) for EXERCISE and wait for its grade; prints the address of
    the submission's page, and the result."""
    _ = translator(lang).gettext
    token, token_refused = _token()
    headers = {"Authorization": f"Bearer {token}"}
    server = _server(server)
    http = _retrying()
    with open(file, "rb") as f:
        # one key for this submission, on every retry: the server stores it once
        created = _call("POST", f"{server}/api/v1/submissions", http, token_refused,
                        params={"lang": lang},
                        headers={**headers, "Idempotency-Key": str(uuid.uuid4())},
                        data={"exercise": exercise}, files={"file": (file.name, f)})
    page = f"{server}/submissions/{created['id']}"  # the web page, not the API's address
    address = on_server(server, created["url"])  # with the token: to this server alone
    click.echo(_("submitted %(file)s for %(exercise)s: %(url)s")
               % {"file": file.name, "exercise": exercise, "url": page}, err=True)
    if not wait:
        click.echo(json.dumps(dict(created, page=page)) if as_json else page)
        return
    status, started, shown = created, time.monotonic(), ""
    live = sys.stderr.isatty()
    while status["status"] in ("queued", "running"):
        elapsed = time.monotonic() - started
        if elapsed > timeout:
            click.echo("\n" + _("no grade after %(seconds)s s; the submission stays in the queue: "
                                "%(url)s") % {"seconds": timeout, "url": page}, err=True)
            sys.exit(TIMED_OUT)
        line = _progress(status, elapsed, _)
        if live:
            click.echo(f"\r{line:<40}", err=True, nl=False)
        elif line.rsplit(" · ", 1)[0] != shown:  # a new state or place, not only a new second
            click.echo(line, err=True)
        shown = line.rsplit(" · ", 1)[0]
        time.sleep(POLL_SECONDS)
        status = _call("GET", address, http, token_refused, params={"lang": lang}, headers=headers)
    if status is created:  # sent before and graded since: the answer has no result in it
        status = _call("GET", address, http, token_refused, params={"lang": lang}, headers=headers)
    if live:
        click.echo("\r" + " " * 40 + "\r", err=True, nl=False)
    click.echo(json.dumps(dict(status, page=page)) if as_json
               else summary(file, status, lang, styled_output()))
    sys.exit(GRADED if status["status"] == "graded" else NO_GRADE)

