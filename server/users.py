"""Accounts: adding one, importing a roster, checking and changing a password."""
from __future__ import annotations

import csv
import functools
import io
import re
import secrets

from sqlalchemy import select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from .models import Role, User

USERNAME = re.compile(r"^[a-zA-Z0-9._-]{2,64}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
ROSTER_COLUMNS = ("username", "name", "email", "role")
MIN_PASSWORD_LENGTH = 8


class UserError(ValueError):
    """Bad account data; the message says what and where."""


def validate(username: str, name: str, email: str, role: str) -> None:
    if not USERNAME.match(username):
        raise UserError(f"username {username!r}: use 2-64 letters, digits, '.', '_' or '-'")
    if not name.strip():
        raise UserError(f"user {username}: the name is empty")
    if not EMAIL.match(email):
        raise UserError(f"user {username}: {email!r} is not an email address")
    if role not in {r.value for r in Role}:
        raise UserError(f"user {username}: role must be student, instructor or admin, not {role!r}")


def _check_length(username: str, password: str, minimum: int) -> None:
    if len(password) < minimum:
        raise UserError(f"user {username}: the password needs at least {minimum} characters")


def add_user(session: Session, username: str, name: str, email: str, role: str,
             password: str, *, min_password_length: int = MIN_PASSWORD_LENGTH) -> User:
    validate(username, name, email, role)
    _check_length(username, password, min_password_length)
    if session.scalar(select(User.id).where(User.username == username)) is not None:
        raise UserError(f"user {username} already exists")
    user = User(username=username, name=name.strip(), email=email, role=role,
                password_hash=generate_password_hash(password))
    session.add(user)
    return user


def import_roster(session: Session, text: str) -> list[tuple[str, str]]:
    """Add every row of a roster CSV, or none: returns (username, initial password) pairs."""
    reader = csv.DictReader(io.StringIO(text))
    if reader.fieldnames is None or [f.strip() for f in reader.fieldnames] != list(ROSTER_COLUMNS):
        raise UserError(f"the roster's header must be: {','.join(ROSTER_COLUMNS)}")
    created, seen = [], set()
    for line, row in enumerate(reader, start=2):
        values = [(row.get(c) or "").strip() for c in ROSTER_COLUMNS]
        if None in row or any(v is None for v in row.values()):
            raise UserError(f"line {line}: expected {len(ROSTER_COLUMNS)} columns")
        if values[0] in seen:
            raise UserError(f"line {line}: {values[0]} appears twice")
        seen.add(values[0])
        password = secrets.token_urlsafe(9)
        try:
            add_user(session, *values, password=password)
        except UserError as exc:
            raise UserError(f"line {line}: {exc}") from None
        created.append((values[0], password))
    return created


@functools.cache
def _unknown_user_hash() -> str:
    return generate_password_hash(secrets.token_urlsafe(16))


def authenticate(session: Session, username: str, password: str) -> User | None:
    user = session.scalar(select(User).where(User.username == username)) \
        if USERNAME.fullmatch(username) else None
    # an unknown user costs a hash check as a known one does: the time must not tell who exists
    if not check_password_hash(user.password_hash if user else _unknown_user_hash(), password):
        return None
    return user


def end_sessions(session: Session, user_id: int) -> None:
    """Every session cookie of the user stops working (see User.session_version)."""
    session.execute(update(User).where(User.id == user_id)
                    .values(session_version=User.session_version + 1))


def set_password(session: Session, user: User, password: str) -> None:
    """A new password, which ends every session of the user."""
    _check_length(user.username, password, MIN_PASSWORD_LENGTH)
    user.password_hash = generate_password_hash(password)
    end_sessions(session, user.id)
