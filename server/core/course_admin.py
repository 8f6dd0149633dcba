"""What an admin's two tools for courses share, `hpcgrade courses` and the /admin/courses pages:
a course's Slurm table as people type it (`--slurm KEY=VALUE`, the form's fields) and as it is
shown back, how many people and exercises each course has, and its exercises synced.
server/core/courses.py checks every value."""

from __future__ import annotations

import shlex
from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from server.core.config import SLURM_KEYS
from server.core.courses import CourseError, course_catalogue
from server.core.exercises import sync_exercises
from server.core.models import STAFF_ROLES, Course, Enrolment, Exercise


def slurm_with(table: dict, changes: dict[str, str]) -> dict:
    """The Slurm table with `changes` on top. An empty text takes the key out (the service's
    SLURM_* setting again); `extra` is sbatch options separated by spaces."""
    unknown = sorted(set(changes) - set(SLURM_KEYS))
    if unknown:
        raise CourseError(
            f"slurm: unknown keys {', '.join(unknown)}; valid keys are {', '.join(SLURM_KEYS)}"
        )
    changed = dict(table)
    for key, value in changes.items():
        value = value.strip()
        if not value:
            changed.pop(key, None)
        elif key == "extra":
            try:
                changed[key] = shlex.split(value)
            except ValueError as exc:
                raise CourseError(f"slurm extra: {exc}") from None
        else:
            changed[key] = value
    return changed


def slurm_text(table: dict) -> dict[str, str]:
    """Each key of the table as it is typed: what the form's fields and `courses show` hold."""
    return {
        key: shlex.join(value) if isinstance(value, list) else str(value)
        for key, value in table.items()
    }


def pairs(values: tuple[str, ...]) -> dict[str, str]:
    """KEY=VALUE texts (`--slurm partition=gpu`) as a table; the last of a key counts."""
    table = {}
    for pair in values:
        key, equals, value = pair.partition("=")
        if not equals:
            raise CourseError(f"slurm: {pair!r} is not KEY=VALUE (e.g. partition=gpu)")
        table[key.strip()] = value
    return table


def counts(session: Session) -> dict[int, Counter]:
    """Each course's (by id) students, staff (TAs and instructors) and active exercises."""
    found: dict[int, Counter] = {}
    for course_id, role, number in session.execute(
        select(Enrolment.course_id, Enrolment.role, func.count()).group_by(
            Enrolment.course_id, Enrolment.role
        )
    ):
        found.setdefault(course_id, Counter())["staff" if role in STAFF_ROLES else "students"] += (
            number
        )
    for course_id, number in session.execute(
        select(Exercise.course_id, func.count()).where(Exercise.active).group_by(Exercise.course_id)
    ):
        found.setdefault(course_id, Counter())["exercises"] = number
    return found


def sync_course(session: Session, course: Course) -> tuple[int, dict[str, list[str]]]:
    """The course's exercises in step with its folder: how many it has, and what changed."""
    catalogue = course_catalogue(course)
    return len(catalogue), sync_exercises(session, course, catalogue)
