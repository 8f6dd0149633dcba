"""Mail: each new account's set-password link, and batches of notices
(server/core/notices.py), each sent through one SMTP connection (smtplib).

Nothing is mailed unless MAIL_SERVER is set. The portal checks that the server answers, then
leaves the sending to a worker (the task hpcgrade.mail_links), so that a roster of thousands
holds no request; `hpcgrade users import` sends them itself. A refused address never undoes an
import: it is reported, with its reason, to whoever imported."""

from __future__ import annotations

import smtplib
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from email.message import EmailMessage

from flask_babel import force_locale
from flask_babel import gettext as _
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.config import app_settings
from server.core.counters import count
from server.core.links import make_link
from server.core.models import AuthSource, User
from server.core.users import NO_PASSWORD

TIMEOUT_SECONDS = 10.0  # each exchange with the mail server


class MailAway(Exception):
    """The mail server cannot be reached (or refuses the log-in); the ids not mailed yet."""

    def __init__(self, reason: str, left: list[int]):
        super().__init__(reason)
        self.left = left


def mail_configured() -> bool:
    return bool(app_settings().mail_server)


@contextmanager
def connection() -> Iterator[smtplib.SMTP]:
    """An SMTP session with the configured server, STARTTLS and log-in done."""
    settings = app_settings()
    smtp = smtplib.SMTP(settings.mail_server, settings.mail_port, timeout=TIMEOUT_SECONDS)
    try:
        if settings.mail_starttls:
            smtp.starttls(context=ssl.create_default_context())
        if settings.mail_username:
            smtp.login(settings.mail_username, settings.mail_password or "")
        yield smtp
    finally:
        try:
            smtp.quit()
        except (OSError, smtplib.SMTPException):
            smtp.close()


def server_problem() -> str | None:
    """Why the mail server cannot take mail now (in words), or None when it answers."""
    try:
        with connection() as smtp:
            smtp.noop()
    except (OSError, smtplib.SMTPException) as exc:
        return _reason(exc)
    return None


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def message(to: str, subject: str, body: str) -> EmailMessage:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = app_settings().mail_from, to, subject
    message.set_content(body)
    return message


def _link_message(user: User, base_url: str) -> EmailMessage:
    days = app_settings().set_password_link_days
    body = _(
        "Hello %(name)s,\n\nyou have an account on hpcgrade, the course's grader: your "
        "username is %(username)s. Choose your password by following this link, within "
        "%(days)s days; it works once:\n\n%(link)s\n\nIf the link has expired, ask your "
        "instructor for a new one.\n",
        name=user.name,
        username=user.username,
        days=days,
        link=make_link(user, base_url),
    )
    return message(user.email, _("Your hpcgrade account"), body)


def send_links(
    session: Session, user_ids: list[int], base_url: str, lang: str
) -> list[tuple[User, str]]:
    """Mail each of these accounts that still waits for a password its link, in `lang`, through
    one connection; returns the accounts whose address the server refused, with its answer.
    MailAway when the server cannot be reached, naming the ids not mailed yet."""
    users = session.scalars(
        select(User)
        .where(
            User.id.in_(user_ids),
            User.password_hash == NO_PASSWORD,
            User.auth_source == AuthSource.local.value,
        )
        .order_by(User.id)
    ).all()
    with force_locale(lang):
        batch = [(user.id, _link_message(user, base_url)) for user in users]
    by_id = {user.id: user for user in users}
    return [(by_id[user_id], answer) for user_id, answer in send_batch(session, batch)]


def send_batch(session: Session, batch: list[tuple[int, EmailMessage]]) -> list[tuple[int, str]]:
    """Send each (key, message) through one connection; the keys whose address the server
    refused, with its answer (the SMTP session goes on past them). MailAway when the server
    cannot be reached, naming the keys not sent yet. What went out and what was refused are
    counted in `session`'s transaction, which the caller commits."""
    refused, done = [], 0
    try:
        with connection() as smtp:
            for key, mail in batch:
                try:
                    smtp.send_message(mail)
                except smtplib.SMTPRecipientsRefused as exc:
                    code, answer = next(iter(exc.recipients.values()))
                    refused.append((key, f"{code} {answer.decode(errors='replace')}"))
                done += 1
    except (OSError, smtplib.SMTPException) as exc:
        raise MailAway(_reason(exc), [key for key, _mail in batch[done:]]) from exc
    finally:
        _counted(session, done - len(refused), len(refused))
    return refused


def _counted(session: Session, sent: int, refused: int) -> None:
    """Mail sent and refused, for the operators (hpcgrade_mail_sent_total, …_refused_total):
    in the caller's transaction (SQLite has one writer: a transaction of its own would wait
    for the caller's, which waits for this)."""
    if sent or refused:
        count(session, "mail_sent", sent)
        count(session, "mail_refused", refused)


def report_refused(
    session: Session, staff: User, refused: list[tuple[User, str]], lang: str
) -> None:
    """Tell the staff member who imported which links did not go out, so that they hand them
    out themselves (the roster's page of accounts waiting for a password has them)."""
    with force_locale(lang):
        lines = "\n".join(f"{user.username} <{user.email}>: {answer}" for user, answer in refused)
        body = _(
            "The mail server refused these addresses, so their accounts did not get their "
            "set-password links. Hand them their links yourself: on the Roster page, "
            "Accounts waiting for a password.\n\n%(lines)s\n",
            lines=lines,
        )
        report = message(staff.email, _("Set-password links not mailed"), body)
    try:
        with connection() as smtp:
            smtp.send_message(report)
    except (OSError, smtplib.SMTPException) as exc:
        raise MailAway(_reason(exc), []) from exc
    _counted(session, 1, 0)
