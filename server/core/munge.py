"""MUNGE credentials from the cluster: a student on a login or compute node submits with no
password and no token, because the cluster vouches for their uid, as it does between Slurm's
own daemons.

The client (hpcgrade/service.py) makes one credential per request with `munge -s`, its payload
the request's binding: `hpcgrade-api-v1 METHOD PATH?QUERY SHA256-OF-BODY`. The service decodes
it with `unmunge` (here, or on SLURM_SUBMIT_HOST over ssh), which refuses a forged, expired or
replayed one; then it checks that the payload binds this very request (a credential made for
another file, exercise or course is worthless here), that it is recent, that no other request
used it (the database remembers it: several portals, each with its own munged, share no replay
cache), and maps the uid, by the name the decoding host gives it, to an account of the sources
MUNGE_ACCOUNTS names."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
import subprocess
from dataclasses import dataclass

from flask_babel import gettext as _
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from server.core.config import Settings
from server.core.models import MungeCredential, User, utcnow
from server.core.submit_host import command_prefix, remote_command

UNMUNGE_SECONDS = 10
FIELD = re.compile(r"^([A-Z_]+):\s+(.*)$")
NAMED_NUMBER = re.compile(r"^(?:(\S+) )?\((\d+)\)$")  # "alice (1001)"; "??? (1001)" unnamed
UNNAMED = "???"
CREDENTIAL = re.compile(r"MUNGE:([A-Za-z0-9+/=]+):")
# unmunge's exit statuses that are the service's trouble (munge.h: EMUNGE_SNAFU, _OVERFLOW,
# _NO_MEMORY, _SOCKET, _TIMEOUT); the others say what is wrong with the credential
SERVICE_TROUBLE = {1, 4, 5, 6, 7}


class MungeRefused(ValueError):
    """The credential proves nothing for this request; the message says why, to the client."""


class MungeUnavailable(RuntimeError):
    """unmunge could not be asked (no munged, ssh failed): the service's trouble, not the
    client's; `output` is what it printed."""

    def __init__(self, message: str, output: str = ""):
        super().__init__(message)
        self.output = output


@dataclass(frozen=True)
class Decoded:
    """What unmunge says of a credential it decoded."""

    status: str  # "Success", "Replayed credential", "Expired credential"…
    uid: int
    user_name: str | None  # as the decoding host names the uid
    encoded_at: dt.datetime
    payload: str


def binding(method: str, path: str, body: bytes) -> str:
    """The payload that binds a credential to one request: its method, its path and query as
    the client sent them, and its body's hash (the file, the exercise and the course)."""
    return f"hpcgrade-api-v1 {method} {path} {hashlib.sha256(body).hexdigest()}"


def parse_unmunge(output: str) -> Decoded:
    """unmunge's metadata lines, a blank line, then the payload."""
    head, _blank, payload = output.partition("\n\n")
    fields = {}
    for line in head.splitlines():
        found = FIELD.match(line)
        if found:
            fields[found[1]] = found[2].strip()
    uid = NAMED_NUMBER.match(fields.get("UID", ""))
    encoded = re.search(r"\((\d+)\)$", fields.get("ENCODE_TIME", ""))
    status = re.sub(r"\s*\(\d+\)$", "", fields.get("STATUS", ""))
    if not status or (status == "Success" and (uid is None or encoded is None)):
        raise MungeUnavailable("unmunge answered in a way this service cannot read", output)
    return Decoded(
        status,
        int(uid[2]) if uid else -1,
        uid[1] if uid else None,
        dt.datetime.fromtimestamp(int(encoded[1]) if encoded else 0, dt.timezone.utc),
        payload,
    )


def decode(settings: Settings, credential: str) -> Decoded:
    """unmunge's reading of the credential (here, or on the submit host)."""
    if not CREDENTIAL.fullmatch(credential):
        raise MungeRefused(_("not a MUNGE credential"))
    args = ["unmunge", *(["-S", settings.munge_socket] if settings.munge_socket else [])]
    try:
        done = subprocess.run(
            remote_command(command_prefix(settings), args),
            input=credential,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=UNMUNGE_SECONDS,
        )
    except subprocess.TimeoutExpired:
        raise MungeUnavailable(f"unmunge did not answer in {UNMUNGE_SECONDS} s") from None
    except OSError as exc:
        raise MungeUnavailable(f"cannot run unmunge: {exc.strerror}") from None
    if done.stdout.startswith("STATUS:"):  # decoded or refused: unmunge says which
        return parse_unmunge(done.stdout)
    if done.returncode in SERVICE_TROUBLE or done.returncode > 18:  # 255: ssh failed
        raise MungeUnavailable(
            f"unmunge failed (exit {done.returncode})", done.stdout + done.stderr
        )
    raise MungeRefused(_("not a MUNGE credential of this cluster"))


def vouched_user(session: Session, settings: Settings, credential: str, expected: str) -> User:
    """The account the credential proves its sender is, for the request whose binding is
    `expected`; MungeRefused (the client's), MungeUnavailable (the service's)."""
    decoded = decode(settings, credential)
    if decoded.status == "Rewound credential":
        raise MungeRefused(
            _("the credential was made in the future: this node's clock is ahead of the service's")
        )
    if decoded.status != "Success":
        raise MungeRefused(
            _(
                "%(status)s: each request needs a new credential, made just before it",
                status=decoded.status.lower(),
            )
        )
    if decoded.payload != expected:
        raise MungeRefused(
            _("the credential was made for another request (another file, exercise or course)")
        )
    now = utcnow()
    age = settings.munge_max_age_seconds
    if not now - dt.timedelta(seconds=age) <= decoded.encoded_at <= now + dt.timedelta(seconds=age):
        raise MungeRefused(
            _(
                "the credential was made more than %(seconds)s s from now (is "
                "this node's clock right?)",
                seconds=age,
            )
        )
    if decoded.uid < settings.munge_min_uid:
        raise MungeRefused(_("uid %(uid)s may not submit with MUNGE", uid=decoded.uid))
    if decoded.user_name in (None, UNNAMED):
        raise MungeRefused(
            _(
                "the service cannot name uid %(uid)s (it is no user of its directory)",
                uid=decoded.uid,
            )
        )
    user = session.scalar(
        select(User).where(
            User.username == decoded.user_name, User.auth_source.in_(settings.munge_accounts)
        )
    )
    if user is None:
        raise MungeRefused(
            _(
                "the cluster user %(username)s has no account here that MUNGE "
                "vouches for: log in with `hpcgrade login`",
                username=decoded.user_name,
            )
        )
    _spend(session, credential, decoded.encoded_at + dt.timedelta(seconds=age))
    return user


def _spend(session: Session, credential: str, expires_at: dt.datetime) -> None:
    """Remember the credential until it could no longer pass; a second use is refused."""
    session.execute(delete(MungeCredential).where(MungeCredential.expires_at < utcnow()))
    # munged writes and reads one text per credential (base64 without spare bits or padding)
    session.add(
        MungeCredential(
            digest=hashlib.sha256(credential.encode()).hexdigest(), expires_at=expires_at
        )
    )
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise MungeRefused(
            _("replayed credential: each request needs a new credential, made just before it")
        ) from None
