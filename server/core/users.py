"""Accounts: adding one, reading and importing a roster, checking and changing a password.

The messages are translated (Flask-Babel): outside a request, as in the CLI, they are English."""

from __future__ import annotations

import csv
import functools
import io
import re
import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from flask_babel import gettext as _
from sqlalchemy import Select, select, update
from sqlalchemy.orm import Session
from werkzeug.security import check_password_hash, generate_password_hash

from server.core.courses import enrol, open_courses
from server.core.links import fingerprint
from server.core.models import AuthSource, Course, CourseRole, Enrolment, User
from server.core.tokens import revoke

USERNAME = re.compile(r"^[a-zA-Z0-9._-]{2,64}$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
# the columns' lengths (models.User): PostgreSQL refuses a longer value
NAME_LENGTH = 200
EMAIL_LENGTH = 254
# a tab, a line break, an escape sequence…: C0 and C1 controls and DEL, which no name or email holds
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
ROSTER_COLUMNS = ("username", "name", "email", "role")
# a roster's and an account's roles: one in a course, or admin (global: every course)
ADMIN = "admin"
ROLES = (*(role.value for role in CourseRole), ADMIN)
MIN_PASSWORD_LENGTH = 8
# the password hash of an account whose owner has not set a password yet (server/core/links.py): no
# hash werkzeug makes starts with "!", so no password matches it
NO_PASSWORD = "!no-password"
ZIP_SIGNATURE = b"PK\x03\x04"  # an .xlsx or .ods spreadsheet is a zip archive


class UserError(ValueError):
    """Bad account data; the message says what and where."""


@dataclass(frozen=True)
class RosterRow:
    line: int
    username: str
    name: str
    email: str
    role: str


@dataclass
class RosterPlan:
    """What a roster would change in a course: the accounts to add (and enrol), the existing
    accounts to enrol with their row's role, those in the course already (left as they are)
    and the wrong lines, as (line number, problem)."""

    new: list[RosterRow] = field(default_factory=list)
    enrol: list[RosterRow] = field(default_factory=list)
    existing: list[RosterRow] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)


def validate(
    username: str, name: str, email: str, role: str, *, email_required: bool = True
) -> None:
    """A username, name, address and role an account may have (the centre's people may have
    no address: `email_required`)."""
    if not USERNAME.fullmatch(username):  # not match: "$" also matches before a final "\n"
        raise UserError(
            _(
                "username “%(username)s”: use 2 to 64 letters, digits, “.”, “_” or “-”",
                username=username,
            )
        )
    if not name.strip():
        raise UserError(_("user %(username)s: the name is empty", username=username))
    if len(name.strip()) > NAME_LENGTH:
        raise UserError(
            _(
                "user %(username)s: the name has %(length)s characters; at most %(num)s fit",
                username=username,
                length=len(name.strip()),
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
    if CONTROL.search(name.strip()):
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
) -> User:
    """An account, enrolled in `course` with `role` (where the service has one course, that
    one), or an admin; without a password, one waiting for its owner to set one (its link), or
    one of the directory's people (`auth_source`), who log in with its password."""
    validate(username, name, email, role)
    if password is not None:
        _check_length(username, password, min_password_length)
    if session.scalar(select(User.id).where(User.username == username)) is not None:
        raise UserError(_("user %(username)s already exists", username=username))
    if role != ADMIN and course is None:
        course = only_course(session)
    user = User(
        username=username,
        name=name.strip(),
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
) -> tuple[User, bool]:
    """A new account in the course, or the existing account of that username enrolled in it
    (its name, email and password stay as they are: a student of two courses is one account);
    (the account, whether it is new)."""
    user = session.scalar(select(User).where(User.username == username))
    if user is None:
        return add_user(
            session, username, name, email, role, password, course=course, auth_source=auth_source
        ), True
    validate(username, name, email, role)
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


def decode_roster(data: bytes) -> str:
    """A roster file's text, or a refusal that says how to save it right."""
    if data.startswith(ZIP_SIGNATURE):
        raise UserError(
            _("this is a spreadsheet file, not CSV: save it as “CSV UTF-8” and upload that")
        )
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise UserError(_("the file is UTF-16 text: save it as “CSV UTF-8”"))
    if b"\0" in data:
        raise UserError(_("the file holds NUL bytes, so it is not a CSV text file"))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(
            _(
                "line %(line)s is not UTF-8 text: save the file as “CSV UTF-8”",
                line=data[: exc.start].count(b"\n") + 1,
            )
        ) from None


def read_roster(
    session: Session, text: str, course: Course, roles: Collection[str] = ROLES
) -> RosterPlan:
    """Read a roster CSV (username,name,email,role; commas or semicolons) against the accounts
    there are and the course's (the text as decode_roster gives it). A row whose role is not
    in `roles` is an error (who may add what)."""
    if not text.strip():
        raise UserError(_("the file is empty"))
    first_line = text.split("\n", 1)[0]
    # a spreadsheet set to Spanish saves its CSV with semicolons
    delimiter = ";" if first_line.count(";") > first_line.count(",") else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    try:
        header = [name.strip().lower() for name in reader.fieldnames or ()]
    except csv.Error as exc:
        raise _not_csv(1, exc) from None
    if header != list(ROSTER_COLUMNS):
        raise UserError(
            _(
                "the roster's header must be: %(columns)s (it is: %(found)s)",
                columns=",".join(ROSTER_COLUMNS),
                found=",".join(header),
            )
        )
    plan, first_seen, rows = RosterPlan(), {}, []
    # the lines as the csv module splits them (str.splitlines splits at more characters)
    lines = io.StringIO(text, newline="").readlines()
    for line, row in _rows(lines, header, delimiter, plan):
        if None in row or any(value is None for value in row.values()):
            plan.errors.append((line, _("expected %(num)s columns", num=len(ROSTER_COLUMNS))))
            continue
        values = RosterRow(line, *(row[column].strip() for column in ROSTER_COLUMNS))
        problem = _row_problem(values, roles, first_seen)
        if problem:
            plan.errors.append((line, problem))
        else:
            rows.append(values)
        first_seen.setdefault(values.username, line)
    if not rows and not plan.errors:
        raise UserError(_("the roster lists no accounts"))
    _sort_rows(session, rows, course, plan)
    plan.errors.sort()
    return plan


def _sort_rows(session: Session, rows: list[RosterRow], course: Course, plan: RosterPlan) -> None:
    """Each valid row into the plan: a new account, one to enrol, or one left as it is."""
    there = {
        user.username: (user, enrolled)
        for user, enrolled in session.execute(
            select(User, Enrolment.id)
            .outerjoin(
                Enrolment, (Enrolment.user_id == User.id) & (Enrolment.course_id == course.id)
            )
            .where(User.username.in_([row.username for row in rows]))
        )
    }
    for row in rows:
        user, enrolled = there.get(row.username, (None, None))
        if user is None:
            plan.new.append(row)
        elif enrolled is not None or (row.role == ADMIN and user.is_admin):
            plan.existing.append(row)
        elif row.role == ADMIN:
            plan.errors.append(
                (
                    row.line,
                    _(
                        "user %(username)s exists already and is not an admin: a roster makes no "
                        "existing account an admin",
                        username=row.username,
                    ),
                )
            )
        else:
            plan.enrol.append(row)


def _rows(lines: list[str], header: list[str], delimiter: str, plan: RosterPlan):
    """(line, row) for each row after the header, numbered by the line it ends on. A row that
    is not CSV is a wrong line of the plan, numbered by the line where it begins, and reading
    goes on on the next line: a quote left open does not take the rest of the file with it."""
    start = 1  # lines[start:] are read: the header is line 1
    while start < len(lines):
        reader = csv.DictReader(lines[start:], fieldnames=header, delimiter=delimiter, strict=True)
        while True:
            begins = start + reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                plan.errors.append((begins, _not_csv_problem(exc)))
                start = begins  # on from the line after the one where the row began
                break
            yield start + reader.line_num, row


def _not_csv(line: int, exc: csv.Error) -> UserError:
    return UserError(_("line %(line)s: %(problem)s", line=line, problem=_not_csv_problem(exc)))


def _not_csv_problem(exc: csv.Error) -> str:
    return _(
        "not CSV (%(reason)s); a value with a comma, a quote or a line break goes in double "
        "quotes, its own quotes doubled",
        reason=str(exc),
    )


def _row_problem(row: RosterRow, roles: Collection[str], first_seen: dict[str, int]) -> str | None:
    if row.username in first_seen:
        return _(
            "%(username)s appears twice (first on line %(line)s)",
            username=row.username,
            line=first_seen[row.username],
        )
    try:
        validate(row.username, row.name, row.email, row.role)
    except UserError as exc:
        return str(exc)
    if row.role not in roles:
        return _(
            "user %(username)s: %(problem)s", username=row.username, problem=role_refused(row.role)
        )
    return None


def role_refused(role: str) -> str:
    """Why a role given in a course's roster page is refused."""
    if role == ADMIN:
        return _("admins are added with the command line only")
    return _("only an admin may add instructors")


def create_accounts(
    session: Session, rows: list[RosterRow], course: Course, in_directory: Collection[str] = ()
) -> list[User]:
    """An account for each (checked) row, enrolled in the course (an admin row: global),
    waiting for its owner to set a password, or, for the usernames `in_directory`, one of the
    directory's people: nothing is hashed, so a course's roster (thousands of rows) takes a
    moment, not a slow hash a row."""
    users = [
        User(
            username=row.username,
            name=row.name,
            email=row.email,
            is_admin=row.role == ADMIN,
            password_hash=NO_PASSWORD,
            auth_source=(
                AuthSource.ldap if row.username in in_directory else AuthSource.local
            ).value,
        )
        for row in rows
    ]
    session.add_all(users)
    session.flush()  # their ids (one INSERT of many rows), which their links name
    session.add_all(
        [
            Enrolment(user_id=user.id, course_id=course.id, role=row.role)
            for user, row in zip(users, rows)
            if row.role != ADMIN
        ]
    )
    session.flush()
    return users


def enrol_accounts(session: Session, rows: list[RosterRow], course: Course) -> list[User]:
    """The existing account of each (checked) row enrolled in the course with its row's role."""
    accounts = {
        user.username: user
        for user in session.scalars(
            select(User).where(User.username.in_([row.username for row in rows]))
        )
    }
    session.add_all(
        [
            Enrolment(user_id=accounts[row.username].id, course_id=course.id, role=row.role)
            for row in rows
        ]
    )
    session.flush()
    return [accounts[row.username] for row in rows]


def import_roster(
    session: Session,
    text: str,
    course: Course,
    known_to_directory: Callable[[list[str]], set[str]] = lambda _names: set(),
) -> tuple[list[User], RosterPlan]:
    """Every row of a roster CSV into the course, or none where a line is wrong: new accounts
    added (those whose usernames `known_to_directory` finds, as the directory's), existing
    ones enrolled, the course's own left as they are; (the new accounts, the plan)."""
    plan = read_roster(session, text, course)
    if plan.errors:
        raise UserError(
            "\n".join(
                _("line %(line)s: %(problem)s", line=line, problem=problem)
                for line, problem in plan.errors
            )
        )
    created = create_accounts(
        session, plan.new, course, known_to_directory([row.username for row in plan.new])
    )
    enrol_accounts(session, plan.enrol, course)
    return created, plan


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
