"""A course's exercises in the database, kept in step with its exercises folder."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.catalogue import ExerciseInfo
from server.core.models import Course, Exercise, utcnow


def sync_exercises(
    session: Session, course: Course, catalogue: dict[str, ExerciseInfo]
) -> dict[str, list[str]]:
    """Insert the course's new exercises, update changed ones, deactivate those whose folder is
    gone. A deadline that names no policy takes the course's.

    Submissions keep pointing at a deactivated exercise, so nothing graded is ever lost."""
    changes: dict[str, list[str]] = {"added": [], "updated": [], "deactivated": []}
    rows = {
        row.slug: row
        for row in session.scalars(select(Exercise).where(Exercise.course_id == course.id))
    }
    for slug, info in catalogue.items():
        deadline = info.deadline.in_course(course.deadline_policy, course.penalty_per_day)
        values = {
            "title_en": info.title["en"],
            "title_es": info.title["es"],
            "section": info.section,
            "deadline": deadline.at,
            "deadline_policy": deadline.policy,
            "penalty_per_day": float(deadline.penalty_per_day),
            "max_attempts": info.max_attempts,
            "position": info.order,
            "active": True,
            "version": info.version,
        }
        row = rows.get(slug)
        if row is None:
            session.add(
                row := Exercise(course_id=course.id, slug=slug, synced_at=utcnow(), **values)
            )
            changes["added"].append(slug)
        elif any(getattr(row, k) != v for k, v in values.items()):
            for key, value in values.items():
                setattr(row, key, value)
            row.synced_at = utcnow()
            changes["updated"].append(slug)
        row.commit = info.commit  # the same files committed, or copied out of a checkout
    for slug, row in rows.items():
        if slug not in catalogue and row.active:
            row.active = False
            changes["deactivated"].append(slug)
    return changes
