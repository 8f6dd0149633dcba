"""API tokens: issuing one (kept as a digest, with a label and an expiry), listing, revoking."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from flask_babel import gettext as _
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from server.core.models import ApiToken, User, utcnow

LABEL_LENGTH = 100


class TokenError(ValueError):
    """A bad label or an unknown token; the message says which."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def clean_label(label: object) -> str:
    if not isinstance(label, str) or len(label.strip()) > LABEL_LENGTH or not label.isprintable():
        # in the reader's language; outside a request (the CLI) in English
        raise TokenError(
            _("the label must be text of up to %(num)s printable characters", num=LABEL_LENGTH)
        )
    return label.strip()


def issue(session: Session, user: User, label: str, lifetime_days: int) -> tuple[str, ApiToken]:
    """A new token for the user (shown once: only its digest is stored) and its row."""
    token = secrets.token_urlsafe(32)
    row = ApiToken(
        user=user,
        token_hash=digest(token),
        label=clean_label(label),
        expires_at=utcnow() + dt.timedelta(days=lifetime_days),
    )
    session.add(row)
    return token, row


def listed(session: Session, user_id: int | None = None) -> list[ApiToken]:
    """Tokens (of one user, or all), newest first, with their users loaded."""
    query = select(ApiToken).join(ApiToken.user).order_by(ApiToken.id.desc())
    if user_id is not None:
        query = query.where(ApiToken.user_id == user_id)
    return list(session.scalars(query))


def revoke(session: Session, *, token_id: int | None = None, user_id: int | None = None) -> int:
    """Delete one token (of this user, if given) or every token of a user; how many went."""
    if token_id is None and user_id is None:
        raise TokenError("say which token, or whose")
    query = delete(ApiToken)
    if token_id is not None:
        query = query.where(ApiToken.id == token_id)
    if user_id is not None:
        query = query.where(ApiToken.user_id == user_id)
    return session.execute(query).rowcount
