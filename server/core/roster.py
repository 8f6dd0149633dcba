"""A course's roster as a CSV file, read and imported: what the roster page (server/web/roster.py)
previews and `hpcgrade users import` brings in, read alike.

A class list comes as the university's system or a spreadsheet exports it: commas or semicolons
(a spreadsheet set to Spanish), its own headers in English or Spanish. The columns are guessed
from the header (`guess_columns`), which the roster page shows for the instructor to confirm or
change; the role column may be left out (everyone a student) and its words may be Spanish.

The messages are translated (Flask-Babel): outside a request, as in the CLI, they are English."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.models import AuthSource, Course, CourseRole, Enrolment, User
from server.core.names import folded, name_parts
from server.core.users import ADMIN, NO_PASSWORD, ROLES, UserError, role_refused, validate

ZIP_SIGNATURE = b"PK\x03\x04"  # an .xlsx or .ods spreadsheet is a zip archive
DELIMITERS = ",;\t"
# what a column holds → what it is called for the instructor who maps it
FIELDS = {
    "username": _l("Username"),
    "given_name": _l("Given name"),
    "family_name": _l("Family name"),
    "name": _l("Full name"),
    "email": _l("Email"),
    "role": _l("Role"),
}
# the headers of common exports, folded (server/core/names.py): "Correo electrónico" is one
HEADERS = {
    "username": {"username", "user", "usuario", "login", "user name", "nombre de usuario", "uid"},
    "given_name": {"given name", "given_name", "first name", "first_name", "forename", "nombres"},
    "family_name": {
        *("family name", "family_name", "last name", "last_name", "surname", "surnames"),
        *("apellidos", "apellido", "apellido(s)"),
    },
    "name": {"name", "full name", "nombre completo", "nombre y apellidos", "display name"},
    "email": {
        *("email", "e-mail", "mail", "email address", "e-mail address"),
        *("correo", "correo electronico", "direccion de correo", "direccion de correo electronico"),
    },
    "role": {"role", "rol", "papel", "tipo"},
}
# "Nombre" is a given name beside a column of surnames, else the full name
NOMBRE = "nombre"
# a role as a roster may write it, folded → the role
ROLE_WORDS = {
    **{word: CourseRole.student.value for word in ("student", "estudiante", "alumno", "alumna")},
    **{word: CourseRole.ta.value for word in ("ta", "teaching assistant", "assistant")},
    **{word: CourseRole.ta.value for word in ("ayudante", "profesor asistente", "asistente")},
    **{word: CourseRole.ta.value for word in ("profesora asistente", "tutor", "tutora")},
    **{word: CourseRole.instructor.value for word in ("instructor", "instructora", "teacher")},
    **{word: CourseRole.instructor.value for word in ("profesor", "profesora", "docente")},
    ADMIN: ADMIN,
    "administrador": ADMIN,
    "administradora": ADMIN,
}
TEMPLATE = "username,given_name,family_name,email,role\r\n"
TEMPLATE += "agarcia,Ana,García López,ana.garcia@uni.es,student\r\n"


@dataclass(frozen=True)
class RosterRow:
    line: int
    username: str
    name: str
    email: str
    role: str
    given_name: str = ""
    family_name: str = ""


@dataclass
class RosterPlan:
    """What a roster would change in a course: the accounts to add (and enrol), the existing
    accounts to enrol with their row's role, those in the course already (left as they are),
    the wrong lines, as (line number, problem), and what to look at before importing (an
    address twice, or another account's), as (line number, warning)."""

    new: list[RosterRow] = field(default_factory=list)
    enrol: list[RosterRow] = field(default_factory=list)
    existing: list[RosterRow] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    warnings: list[tuple[int, str]] = field(default_factory=list)


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


def roster_header(text: str) -> tuple[str, list[str]]:
    """The roster's delimiter, the one of `,`, `;` and a tab its first line holds most of
    (outside quotes), and its header's names."""
    if not text.strip():
        raise UserError(_("the file is empty"))
    first_line = text.split("\n", 1)[0]
    unquoted = first_line.replace('""', "").split('"')[::2]
    delimiter = max(DELIMITERS, key=lambda d: sum(part.count(d) for part in unquoted))
    if not any(delimiter in part for part in unquoted):
        delimiter = ","
    try:
        header = next(csv.reader([first_line.rstrip("\r")], delimiter=delimiter, strict=True))
    except csv.Error as exc:
        raise UserError(
            _("line %(line)s: %(problem)s", line=1, problem=_not_csv_problem(exc))
        ) from None
    return delimiter, [name.strip() for name in header]


def guess_columns(header: list[str]) -> dict[str, int]:
    """field → the header's column that holds it, guessed from the header's names."""
    names = [folded(" ".join(name.split())) for name in header]
    columns = {}
    for field_name, known in HEADERS.items():
        found = next((i for i, name in enumerate(names) if name in known), None)
        if found is not None:
            columns[field_name] = found
    if NOMBRE in names:
        columns.setdefault(
            "given_name" if "family_name" in columns else "name", names.index(NOMBRE)
        )
    return columns


def chosen_columns(header: list[str], chosen: Mapping[str, str]) -> dict[str, int]:
    """field → column from a form's choices (a column's number, or "" for none); a number
    the header does not have is none."""
    columns = {}
    for field_name in FIELDS:
        value = chosen.get(field_name, "")
        if value.isdigit() and int(value) < len(header):
            columns[field_name] = int(value)
    return columns


def missing_columns(columns: Mapping[str, int]) -> list[str]:
    """The fields a roster needs that no column holds: a username, an address, and a name
    (whole, or given and family)."""
    missing = [field_name for field_name in ("username", "email") if field_name not in columns]
    if not {"name", "given_name", "family_name"} & set(columns):
        missing.append("name")
    return missing


def read_roster(
    session: Session,
    text: str,
    course: Course,
    roles: Collection[str] = ROLES,
    columns: Mapping[str, int] | None = None,
) -> RosterPlan:
    """Read a roster CSV (the text as decode_roster gives it) against the accounts there are and
    the course's: its `columns` as field → column, else as guessed from its header. A row whose
    role is not in `roles` is an error (who may add what); one without a role is a student's."""
    delimiter, header = roster_header(text)
    columns = guess_columns(header) if columns is None else columns
    missing = missing_columns(columns)
    if missing:
        raise UserError(
            _(
                "no column of the roster holds the %(fields)s: its header is %(found)s, and it "
                "needs a username, an email address and a name (whole, or given and family "
                "names), with a role if not every one is a student",
                fields=", ".join(str(FIELDS[name]).lower() for name in missing),
                found=delimiter.join(header),
            )
        )
    plan, first_seen, rows = RosterPlan(), {}, []
    # the lines as the csv module splits them (str.splitlines splits at more characters)
    lines = io.StringIO(text, newline="").readlines()
    for line, values in _rows(lines, delimiter, plan):
        if not any(value.strip() for value in values):
            continue  # a blank line, or one of empty cells as a spreadsheet leaves at the end
        if len(values) != len(header):
            plan.errors.append((line, _("expected %(num)s columns", num=len(header))))
            continue
        row = _row(line, values, columns)
        problem = _row_problem(row, roles, first_seen)
        if problem:
            plan.errors.append((line, problem))
        else:
            rows.append(row)
        first_seen.setdefault(row.username, line)
    if not rows and not plan.errors:
        raise UserError(_("the roster lists no accounts"))
    _sort_rows(session, rows, course, plan)
    plan.warnings = _address_warnings(session, rows)
    plan.errors.sort()
    return plan


def _row(line: int, values: list[str], columns: Mapping[str, int]) -> RosterRow:
    cells = {field_name: values[i].strip() for field_name, i in columns.items()}
    name, given, family = name_parts(
        cells.get("name", ""), cells.get("given_name", ""), cells.get("family_name", "")
    )
    role = cells.get("role", "") or CourseRole.student.value
    return RosterRow(
        line,
        cells["username"],
        name,
        cells["email"],
        ROLE_WORDS.get(folded(" ".join(role.split())), role),
        given,
        family,
    )


def _address_warnings(session: Session, rows: list[RosterRow]) -> list[tuple[int, str]]:
    """An address on two rows, or another account's: not wrong (a shared address happens), but
    worth a look before accounts are made, since a set-password link goes to it."""
    warnings = []
    first_on: dict[str, RosterRow] = {}
    for row in rows:
        seen = first_on.setdefault(row.email.casefold(), row)
        if seen is not row:
            warnings.append(
                (
                    row.line,
                    _(
                        "%(email)s is also the address of %(username)s (line %(line)s)",
                        email=row.email,
                        username=seen.username,
                        line=seen.line,
                    ),
                )
            )
    taken = session.execute(
        select(func.lower(User.email), User.username).where(
            func.lower(User.email).in_(list(first_on))
        )
    ).all()
    owners: dict[str, list[str]] = {}
    for email, username in taken:
        owners.setdefault(email, []).append(username)
    for row in rows:
        others = sorted(set(owners.get(row.email.casefold(), ())) - {row.username})
        if others:
            warnings.append(
                (
                    row.line,
                    _(
                        "%(email)s is already the address of the account %(usernames)s",
                        email=row.email,
                        usernames=", ".join(others),
                    ),
                )
            )
    return sorted(warnings)


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


def _rows(lines: list[str], delimiter: str, plan: RosterPlan):
    """(line, values) for each row after the header, numbered by the line it ends on. A row
    that is not CSV is a wrong line of the plan, numbered by the line where it begins, and
    reading goes on on the next line: a quote left open does not take the rest of the file."""
    start = 1  # lines[start:] are read: the header is line 1
    while start < len(lines):
        reader = csv.reader(lines[start:], delimiter=delimiter, strict=True)
        while True:
            begins = start + reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                plan.errors.append((begins, _not_csv_problem(exc)))
                start = begins  # on from the line after the one where the row began
                break
            yield start + reader.line_num, values


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
        validate(
            row.username,
            row.name,
            row.email,
            row.role,
            given_name=row.given_name,
            family_name=row.family_name,
        )
    except UserError as exc:
        return str(exc)
    if row.role not in roles:
        return _(
            "user %(username)s: %(problem)s", username=row.username, problem=role_refused(row.role)
        )
    return None


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
            given_name=row.given_name,
            family_name=row.family_name,
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
    """Every row of a roster CSV into the course, its columns guessed from its header as the
    roster page guesses them, or none where a line is wrong: new accounts added (those whose
    usernames `known_to_directory` finds, as the directory's), existing ones enrolled, the
    course's own left as they are; (the new accounts, the plan)."""
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
