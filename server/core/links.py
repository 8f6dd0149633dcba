"""Set-password links: how a new account (or one whose password staff reset) gets its password.

A link carries a token signed with SECRET_KEY (itsdangerous, a salt of its own) that names the
user and a fingerprint of their password hash and session version when it was made. Setting the
password changes both, so a link works once, and a later reset retires the links made before
it, with no secret stored anywhere; it also expires after SET_PASSWORD_LINK_DAYS."""

from __future__ import annotations

import hashlib

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from server.core.config import app_settings
from server.core.models import AuthSource, User

SALT = "hpcgrade set-password link"
PATH = "/account/set-password/"


class LinkExpired(Exception):
    """A genuine link past SET_PASSWORD_LINK_DAYS."""


class LinkInvalid(Exception):
    """Not a link this service made (or a truncated one)."""


def fingerprint(user: User) -> str:
    """What the account's password state is now; a link made for another state is spent."""
    state = f"{user.password_hash}\0{user.session_version}".encode()
    return hashlib.sha256(state).hexdigest()[:32]


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(app_settings().secret_key, salt=SALT)


def make_link(user: User, base_url: str = "") -> str:
    """The user's link: base_url (the portal's address, no trailing slash) and the path; a
    path alone without base_url. An account of the directory or of single sign-on has no
    password here, so no link (ValueError)."""
    if user.auth_source != AuthSource.local.value:
        raise ValueError(
            f"{user.username} logs in through {user.auth_source}: no set-password link"
        )
    return base_url + PATH + _serializer().dumps([user.id, fingerprint(user)])


def read_token(token: str) -> tuple[int, str]:
    """(user id, fingerprint) of a token this service signed within its lifetime."""
    max_age = app_settings().set_password_link_days * 86400
    try:
        user_id, made_for = _serializer().loads(token, max_age=max_age)
    except SignatureExpired:
        raise LinkExpired() from None
    except (BadSignature, TypeError, ValueError):
        raise LinkInvalid() from None
    return user_id, made_for
