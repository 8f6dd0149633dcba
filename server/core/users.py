"""Accounts: adding one, checking and changing a password (a roster's are server/core/roster.py).

The messages are translated (Flask-Babel): outside a request, as in the CLI, they are English."""

from __future__ import annotations

import functools
import re
import secrets

from flask_babel import gettext as _
from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from server.core.courses import enrol, open_courses
from server.core.links import fingerprint
from server.core.models import AuthSource, Course, CourseRole, Enrolment, User
from server.core.names import name_parts
from server.core.tokens import revoke

USERNAME = re.compile(r"^[a-zA-Z0-9._-]{2,64}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# the columns' lengths (models.User): PostgreSQL refuses a longer value
NAME_LENGTH = 200
EMAIL_LENGTH = 254
# a tab, a line break, an escape sequence…: C0 and C1 controls and DEL, which no name or email holds
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# what the page that adds one account takes: the given and family names, or a full name to split
ACCOUNT_FIELDS = ("username", "given_name", "family_name", "name", "email", "role")
# a roster's and an account's roles: one in a course, or admin (global: every course)
ADMIN = "admin"
ROLES = (*(role.value for role in CourseRole), ADMIN)
MIN_PASSWORD_LENGTH = 8
# the password hash of an account whose owner has not set a password yet (server/core/links.py): no
# hash werkzeug makes starts with "!", so no password matches it
NO_PASSWORD = "!no-password"


class UserError(ValueError):
    """Bad account data; the message says what and where."""


def validate(
    username: str,
    name: str,
    email: str,
    role: str,
    *,
    email_required: bool = True,
    given_name: str = "",
    family_name: str = "",
) -> None:
    """A username, name, address and role an account may have (the centre's people may have
    no address: `email_required`); the given and family names fit where the name does."""
    if not USERNAME.fullmatch(username):  # not match: "$" also matches before a final "\n"
        raise UserError(
            _(
                "username “%(username)s”: use 2 to 64 letters, digits, “.”, “_” or “-”",
                username=username,
            )
        )
    if not name.strip():
        raise UserError(_("user %(username)s: the name is empty", username=username))
    if max(len(part.strip()) for part in (name, given_name, family_name)) > NAME_LENGTH:
        raise UserError(
            _(
                "user %(username)s: the name has %(length)s characters; at most %(num)s fit",
                username=username,
                length=max(len(part.strip()) for part in (name, given_name, family_name)),
                num=NAME_LENGTH,
            )
        )
    if len(email) > EMAIL_LENGTH:
        raise UserError(
            _(
                "user %(username)s: the email address has %(length)s characters; at "
                "most %(num)s fit",
                username=username,
                length=len(email),
                num=EMAIL_LENGTH,
            )
        )
    if any(CONTROL.search(part.strip()) for part in (name, given_name, family_name)):
        raise UserError(
            _(
                "user %(username)s: the name holds a control character (a tab, a line "
                "break…); remove it",
                username=username,
            )
        )
    if CONTROL.search(email):
        raise UserError(
            _(
                "user %(username)s: the email address holds a control character (a "
                "tab, a line break…); remove it",
                username=username,
            )
        )
    if (email or email_required) and not EMAIL.match(email):
        raise UserError(
            _(
                "user %(username)s: “%(email)s” is not an email address",
                username=username,
                email=email,
            )
        )
    if role not in ROLES:
        raise UserError(
            _(
                "user %(username)s: role must be student, ta, instructor or admin, not “%(role)s”",
                username=username,
                role=role,
            )
        )


def _check_length(username: str, password: str, minimum: int) -> None:
    if len(password) < minimum:
        raise UserError(
            _(
                "user %(username)s: the password needs at least %(num)s characters",
                username=username,
                num=minimum,
            )
        )


def add_user(
    session: Session,
    username: str,
    name: str,
    email: str,
    role: str,
    password: str | None,
    *,
    course: Course | None = None,
    min_password_length: int = MIN_PASSWORD_LENGTH,
    auth_source: AuthSource = AuthSource.local,
    given_name: str = "",
    family_name: str = "",
) -> User:
    """An account, enrolled in `course` with `role` (where the service has one course, that
    one), or an admin; without a password, one waiting for its owner to set one (its link), or
    one of the directory's people (`auth_source`), who log in with its password. The given and
    family names make the name where it is empty; a name alone is split (server/core/names.py)."""
    name, given_name, family_name = name_parts(name, given_name, family_name)
    validate(username, name, email, role, given_name=given_name, family_name=family_name)
    if password is not None:
        _check_length(username, password, min_password_length)
    if session.scalar(select(User.id).where(User.username == username)) is not None:
        raise UserError(_("user %(username)s already exists", username=username))
    if role != ADMIN and course is None:
        course = only_course(session)
    user = User(
        username=username,
        name=name,
        given_name=given_name,
        family_name=family_name,
        email=email,
        is_admin=role == ADMIN,
        password_hash=NO_PASSWORD if password is None else generate_password_hash(password),
        auth_source=auth_source.value,
    )
    session.add(user)
    session.flush()
    if role != ADMIN:
        session.add(Enrolment(user_id=user.id, course_id=course.id, role=role))
    return user


def add_or_enrol(
    session: Session,
    username: str,
    name: str,
    email: str,
    role: str,
    password: str | None,
    *,
    course: Course,
    auth_source: AuthSource = AuthSource.local,
    given_name: str = "",
    family_name: str = "",
) -> tuple[User, bool]:
    """A new account in the course, or the existing account of that username enrolled in it
    (its name, email and password stay as they are: a student of two courses is one account);
    (the account, whether it is new)."""
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        return add_user(
            session,
            username,
            name,
            email,
            role,
            password,
            course=course,
            auth_source=auth_source,
            given_name=given_name,
            family_name=family_name,
        ), True
    name, given_name, family_name = name_parts(name, given_name, family_name)
    validate(username, name, email, role, given_name=given_name, family_name=family_name)
    if role == ADMIN:
        raise UserError(_("user %(username)s already exists", username=username))
    enrolment = session.scalar(
        select(Enrolment).where(Enrolment.user_id == user.id, Enrolment.course_id == course.id)
    )
    if enrolment is not None:
        raise UserError(_("user %(username)s is in this course already", username=username))
    enrol(session, user, course, role)
    return user, False


def only_course(session: Session) -> Course:
    """The course where none is named: the service's one open course, else a refusal that
    names them."""
    courses = open_courses(session)
    if len(courses) != 1:
        raise UserError(
            _(
                "name the course: %(courses)s",
                courses=", ".join(course.slug for course in courses) or _("there is none yet"),
            )
        )
    return courses[0]


def user_role(user: User, enrolment: Enrolment | None) -> str:
    """The role an account shows in a course's roster: admin, else its enrolment's."""
    return ADMIN if user.is_admin or enrolment is None else enrolment.role


def members(course: Course) -> Select:
    """The ids of the accounts enrolled in the course."""
    return select(Enrolment.user_id).where(Enrolment.course_id == course.id)


def students_only(course: Course) -> Select:
    """The ids of the course's students who are in no other course and not admin. Theirs are
    the passwords an instructor may reset: one who could reset the password of someone of
    another course (a student of it, whom they could enrol in their own first, or its staff)
    could take over that account there."""
    elsewhere = select(Enrolment.user_id).where(Enrolment.course_id != course.id)
    return (
        select(User.id)
        .join(Enrolment, Enrolment.user_id == User.id)
        .where(
            Enrolment.course_id == course.id,
            Enrolment.role == CourseRole.student.value,
            User.is_admin.is_(False),
            User.id.not_in(elsewhere),
        )
    )


def has_password(user: User) -> bool:
    return user.password_hash != NO_PASSWORD


def role_refused(role: str) -> str:
    """Why a role given in a course's roster page is refused."""
    if role == ADMIN:
        return _("admins are added with the command line only")
    return _("only an admin may add instructors")


@functools.cache
def _unknown_user_hash() -> str:
    return generate_password_hash(secrets.token_urlsafe(16))


def authenticate(session: Session, username: str, password: str) -> User | None:
    user = (
        session.scalar(select(User).where(User.username == username))
        if USERNAME.fullmatch(username)
        else None
    )
    usable = user is not None and has_password(user)
    # an unknown user, or one with no password yet, costs a hash check as a known one does: the
    # time must not tell who exists
    if not check_password_hash(user.password_hash if usable else _unknown_user_hash(), password):
        return None
    return user if usable else None


def spend_a_password_check(password: str) -> None:
    """The work of checking a password, for a log-in checked elsewhere (the directory): its
    time must not tell it from a local account's."""
    check_password_hash(_unknown_user_hash(), password)


def end_sessions(session: Session, user_id: int) -> None:
    """Every session cookie of the user stops working (see User.session_version)."""
    session.execute(
        update(User).where(User.id == user_id).values(session_version=User.session_version + 1)
    )


def set_password(session: Session, user: User, password: str) -> int:
    """A new password, which ends every session of the user and revokes their API tokens
    (whoever learnt the old password may have made one): returns how many tokens went."""
    _local_only(user)
    _check_length(user.username, password, MIN_PASSWORD_LENGTH)
    user.password_hash = generate_password_hash(password)
    end_sessions(session, user.id)
    return revoke(session, user_id=user.id)


def clear_password(session: Session, user: User) -> int:
    """A staff reset: the account waits for its owner to set a password (its link) as a new
    one does; every session ends and the API tokens are revoked (how many)."""
    _local_only(user)
    user.password_hash = NO_PASSWORD
    end_sessions(session, user.id)
    session.flush()
    session.refresh(user)  # the new session version, which its link carries
    return revoke(session, user_id=user.id)


def _local_only(user: User) -> None:
    """A password here is a local account's: a directory's (or single sign-on's) account
    would otherwise gain a second way in, which its owner's directory password no longer
    governs."""
    if user.auth_source != AuthSource.local.value:
        raise UserError(
            _(
                "user %(username)s logs in through the centre's directory or single "
                "sign-on: its password is changed there, not here",
                username=user.username,
            )
        )


def set_password_once(session: Session, user: User, made_for: str, password: str) -> bool:
    """The password a set-password link sets, written only over the state the link was made
    for: of two forms sent with one link, the second finds it spent (False)."""
    _check_length(user.username, password, MIN_PASSWORD_LENGTH)
    old_hash, old_version = user.password_hash, user.session_version
    if fingerprint(user) != made_for:
        return False
    changed = session.execute(
        update(User)
        .where(
            User.id == user.id, User.password_hash == old_hash, User.session_version == old_version
        )
        .values(password_hash=generate_password_hash(password), session_version=old_version + 1)
    ).rowcount
    return changed == 1
