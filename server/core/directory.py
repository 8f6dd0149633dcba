"""Accounts the centre vouches for (its LDAP directory, its OpenID Connect provider) and the
enrolments its groups make.

Whoever checked the person (server/web/ldap_login.py, server/web/oidc_login.py, `hpcgrade
users sync`) hands over what it learnt: a username, a name, an address (perhaps none), group
names and, from the provider, its `sub`. A local account (the demo's, a guest's, a break-glass
admin's) is never taken over by the centre's person of the same name, nor the other way round;
the directory and the provider are the same centre, so one person may log in by either (the
account keeps the source it was made by). An account that logged in through the provider is
that `sub`'s alone: a username the provider gives to someone else later is refused.

A course names, per role, the groups whose members it enrols (`directory_groups`). The highest
role a person's groups give wins. Enrolments made that way follow the groups (a role changes, a
person who left every group leaves the course); one made by hand is never touched."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from flask_babel import gettext as _
from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.courses import COURSE_ROLES
from server.core.models import AuthSource, Course, CourseRole, Enrolment, User
from server.core.names import name_parts
from server.core.users import NO_PASSWORD, UserError, validate


class DirectoryError(ValueError):
    """The person cannot have an account here this way; the message says why, in the
    reader's words."""


class AnotherOwner(DirectoryError):
    """The username belongs to an account that is not this person's (a local one, or another
    subject's at the provider)."""


@dataclass(frozen=True)
class Person:
    """What the directory or the provider says of someone it vouches for."""

    username: str
    name: str
    email: str
    groups: frozenset[str]
    subject: str | None = None  # the provider's `sub`; None from the directory
    given_name: str = ""  # the directory's givenName and sn, the provider's claims of the names
    family_name: str = ""


@dataclass(frozen=True)
class EnrolmentChange:
    course: str
    username: str
    old_role: str | None  # None: not in the course before
    new_role: str | None  # None: left it


def account_for(session: Session, person: Person, source: AuthSource) -> User:
    """The account of this person, made on their first log-in, its name and address kept up
    to date; DirectoryError where their entry cannot make an account (AnotherOwner where the
    username is another's)."""
    name, given, family = name_parts(person.name, person.given_name, person.family_name)
    name = name or person.username
    try:
        validate(
            person.username,
            name,
            person.email,
            CourseRole.student.value,
            email_required=False,
            given_name=given,
            family_name=family,
        )
    except UserError as exc:
        raise DirectoryError(str(exc)) from None
    user = session.scalar(select(User).where(User.username == person.username))
    if user is None:
        user = User(
            username=person.username,
            name=name,
            given_name=given,
            family_name=family,
            email=person.email,
            password_hash=NO_PASSWORD,
            auth_source=source.value,
            subject=person.subject,
        )
        session.add(user)
        session.flush()
        return user
    if user.auth_source == AuthSource.local.value or (
        person.subject is not None and user.subject not in (None, person.subject)
    ):
        raise AnotherOwner(
            _(
                "the account %(username)s here is another person's (a local "
                "account, or another at the single sign-on service)",
                username=person.username,
            )
        )
    user.name, user.email = name, person.email or user.email
    user.given_name, user.family_name = given, family
    if person.subject is not None:
        user.subject = person.subject
    return user


def role_from_groups(course: Course, groups: Collection[str]) -> str | None:
    """The highest role the course's `directory_groups` give these groups; None: none."""
    found = None
    for role in COURSE_ROLES:  # lowest first: a member of the student and TA groups is a TA
        if set(course.directory_groups.get(role, ())) & set(groups):
            found = role
    return found


def apply_groups(
    session: Session, user: User, groups: Collection[str], courses: Collection[Course] | None = None
) -> list[EnrolmentChange]:
    """Enrol the user as their groups say in every open course that names groups (or in
    `courses`, where a sync reads the groups of some only); the changes made (for a log or a
    sync's report)."""
    changes = []
    if courses is None:
        courses = session.scalars(select(Course).where(Course.archived_at.is_(None))).all()
    enrolments = {
        enrolment.course_id: enrolment
        for enrolment in session.scalars(select(Enrolment).where(Enrolment.user_id == user.id))
    }
    for course in courses:
        if not course.directory_groups:
            continue
        role, enrolment = role_from_groups(course, groups), enrolments.get(course.id)
        if enrolment is not None and not enrolment.from_directory:
            continue  # made by hand
        old = enrolment.role if enrolment is not None else None
        if role == old:
            continue
        if enrolment is None:
            session.add(
                Enrolment(user_id=user.id, course_id=course.id, role=role, from_directory=True)
            )
        elif role is None:
            session.delete(enrolment)
        else:
            enrolment.role = role
        changes.append(EnrolmentChange(course.slug, user.username, old, role))
    session.flush()
    return changes
