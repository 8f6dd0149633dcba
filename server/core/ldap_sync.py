"""Enrolments from the directory's groups between log-ins (`hpcgrade users sync`, and beat's
`hpcgrade.users_sync`): the members of every group a course names get an account (an
instructor sees the roster before the first lecture) and their enrolments; a directory account
in none of them any more leaves the courses its groups had put it in. A course one of whose
groups could not be read (missing, renamed, its members hidden from the service account, or
empty) is left as it is and reported: a directory that answers with less must not take a
whole class out of its course."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.config import Settings
from server.core.directory import DirectoryError, EnrolmentChange, account_for, apply_groups
from server.core.ldap_directory import group_members
from server.core.models import AuthSource, Course, User


@dataclass(frozen=True)
class SyncReport:
    changes: tuple[EnrolmentChange, ...]
    refused: tuple[tuple[str, str], ...]  # (username, why): a member with no account here
    unread: tuple[tuple[str, tuple[str, ...]], ...]  # (course, its groups not read): left as is


def sync_enrolments(
    session: Session, settings: Settings, course: Course | None = None
) -> SyncReport:
    """Read the members of the groups `course` names (else every open course's) in one search
    and enrol them; the changes, not yet committed. DirectoryUnavailable where the directory
    cannot be read: then nothing changes."""
    courses = (
        [course]
        if course is not None
        else session.scalars(select(Course).where(Course.archived_at.is_(None))).all()
    )
    courses = [course for course in courses if course.directory_groups]
    names = set().union(*(_groups_of(course) for course in courses))
    members, read = group_members(settings, names)
    unread = [
        (course.slug, tuple(sorted(_groups_of(course) - read)))
        for course in courses
        if not _groups_of(course) <= read
    ]
    courses = [course for course in courses if _groups_of(course) <= read]
    changes, refused = [], []
    for person in members:
        try:
            user = account_for(session, person, AuthSource.ldap)
        except DirectoryError as exc:
            refused.append((person.username, str(exc)))
            continue
        changes += apply_groups(session, user, person.groups, courses)
    in_groups = {person.username for person in members}
    left = session.scalars(
        select(User).where(
            User.auth_source == AuthSource.ldap.value, User.username.not_in(in_groups)
        )
    ).all()
    for user in left:
        changes += apply_groups(session, user, (), courses)
    return SyncReport(tuple(changes), tuple(refused), tuple(unread))


def _groups_of(course: Course) -> set[str]:
    return set(itertools.chain.from_iterable(course.directory_groups.values()))


def describe(change: EnrolmentChange) -> str:
    """One line of a sync's report: course, user, old → new role ("-": none)."""
    return (
        f"{change.course}: {change.username} {change.old_role or '-'} -> {change.new_role or '-'}"
    )
