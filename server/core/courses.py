"""Courses: creating, editing, copying into a new edition and archiving one; who is enrolled in
which, with what role; each course's exercises folder and Slurm job shape.

Every value is checked here, once, for the command line and the admin's pages alike: a wrong
one is a CourseError that names the field."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.catalogue import (
    DEADLINE_POLICIES,
    SLUG,
    ExerciseInfo,
    current_catalogue,
    default_root,
)
from server.core.config import ConfigError, Resources
from server.core.models import STAFF_ROLES, Course, CourseRole, Enrolment, Exercise, User, utcnow
from server.core.setting_values import time_zone, word

COURSE_ROLES = tuple(role.value for role in CourseRole)
# what an admin sets of a course, beside its slug; a copy into a new edition takes them all
SETTINGS = (
    "title_en",
    "title_es",
    "edition",
    "timezone",
    "exercises_dir",
    "course_python",
    "slurm",
    "deadline_policy",
    "penalty_per_day",
    "job_name",
    "job_comment",
    "wckey",
    "directory_groups",
    "tas_grant_accommodations",
)
# how a yes or a no is written for a setting: the command line's word, a form's checkbox
YES, NO = ("yes", "true", "on", "1"), ("no", "false", "off", "0", "")


class CourseError(ValueError):
    """A course's value is wrong, or the course is not there; the message says which."""


def exercises_path(course: Course) -> Path:
    return Path(course.exercises_dir) if course.exercises_dir else default_root()


def exercise_folder(exercise: Exercise) -> Path:
    return exercises_path(exercise.course) / exercise.slug


def course_catalogue(course: Course) -> dict[str, ExerciseInfo]:
    """The course's exercises as its folder holds them (read again only after a change)."""
    return current_catalogue(exercises_path(course))


def job_names(course: Course) -> tuple[str, str, str]:
    """(job name, --comment, --wckey) of the course's Slurm jobs."""
    return (
        course.job_name or f"hpcgrade-{course.slug}",
        course.job_comment or f"hpcgrade {course.slug}",
        course.wckey or course.slug,
    )


def checked(values: dict[str, Any]) -> dict[str, Any]:
    """The course's settings in `values`, each checked; unknown names are refused."""
    unknown = set(values) - set(SETTINGS)
    if unknown:
        raise CourseError(
            f"unknown course settings: {', '.join(sorted(unknown))}; they are {', '.join(SETTINGS)}"
        )
    values = {
        key: value.strip() if isinstance(value, str) else value for key, value in values.items()
    }
    for key in ("timezone", "exercises_dir", "course_python", "job_name", "job_comment", "wckey"):
        if values.get(key) == "":
            values[key] = None  # the service's default
    try:
        for key in ("title_en", "title_es"):
            if key in values and not (
                isinstance(values[key], str) and values[key] and len(values[key]) <= 200
            ):
                raise CourseError(f"{key}: a title of 1 to 200 characters")
        if values.get("timezone"):
            time_zone("timezone", values["timezone"])
        for key in ("job_name", "wckey"):
            if values.get(key):
                word(key, values[key])
        if "slurm" in values:
            if not isinstance(values["slurm"], dict):
                raise CourseError(
                    "slurm: a table of sbatch settings (partition, account, qos, "
                    "gpus, cpus, memory, time, extra)"
                )
            parsed = Resources.parse_overrides(values["slurm"], "slurm")
            values["slurm"] = {
                key: list(value) if isinstance(value, tuple) else value
                for key, value in parsed.items()
            }
    except ConfigError as exc:
        raise CourseError(str(exc)) from None
    if "directory_groups" in values:
        values["directory_groups"] = checked_groups(values["directory_groups"] or {})
    if "tas_grant_accommodations" in values:
        values["tas_grant_accommodations"] = yes_or_no(
            "tas_grant_accommodations", values["tas_grant_accommodations"]
        )
    if values.get("exercises_dir") and not Path(values["exercises_dir"]).is_dir():
        raise CourseError(f"exercises_dir: {values['exercises_dir']} is not a folder here")
    if "deadline_policy" in values and values["deadline_policy"] not in DEADLINE_POLICIES:
        raise CourseError(f"deadline_policy: one of {', '.join(DEADLINE_POLICIES)}")
    if "penalty_per_day" in values:
        try:
            values["penalty_per_day"] = float(values["penalty_per_day"])
        except (TypeError, ValueError):
            values["penalty_per_day"] = -1.0
        if not 0 <= values["penalty_per_day"] <= 1:
            raise CourseError("penalty_per_day: a fraction between 0 and 1")
    for key in ("edition", "job_comment"):
        if values.get(key) and (
            len(values[key]) > 64 + 191 * (key == "job_comment") or not values[key].isprintable()
        ):
            raise CourseError(
                f"{key}: one printable line, at most "
                f"{255 if key == 'job_comment' else 64} characters"
            )
    return values


def yes_or_no(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in YES + NO:
        return value.lower() in YES
    raise CourseError(f"{key}: yes or no")


def checked_groups(value: object) -> dict[str, list[str]]:
    """A course's `directory_groups`, checked: role → the group names whose members it enrols
    in that role (server/core/directory.py)."""
    if (
        not isinstance(value, dict)
        or not set(value) <= set(COURSE_ROLES)
        or not all(
            isinstance(names, (list, tuple))
            and all(isinstance(name, str) and name.strip() and name.isprintable() for name in names)
            for names in value.values()
        )
    ):
        raise CourseError(
            "directory_groups: a table of role (student, ta, instructor) → a list "
            'of group names, e.g. {student = ["pytorch-students"]}'
        )
    return {
        role: sorted({name.strip() for name in names}) for role, names in value.items() if names
    }


def create_course(session: Session, slug: str, **values: Any) -> Course:
    if not isinstance(slug, str) or not SLUG.match(slug) or len(slug) > 64:
        raise CourseError(f"course “{slug}”: use lower-case letters, digits and single dashes")
    if session.scalar(select(Course.id).where(Course.slug == slug)) is not None:
        raise CourseError(f"course {slug} already exists")
    values = checked({"title_en": slug, **values})
    values.setdefault("title_es", values["title_en"])
    course = Course(slug=slug, **{"slurm": {}, "directory_groups": {}, **values})
    session.add(course)
    session.flush()
    return course


def edit_course(session: Session, course: Course, **values: Any) -> Course:
    for key, value in checked(values).items():
        setattr(course, key, value)
    session.flush()
    return course


def copy_course(session: Session, course: Course, slug: str, **values: Any) -> Course:
    """A new edition: the course's settings (what `values` does not change), its staff and its
    exercises, synced from the copy's folder; no student and no submission."""
    kept = {key: getattr(course, key) for key in SETTINGS}
    copy = create_course(session, slug, **{**kept, **values})
    for enrolment in session.scalars(
        select(Enrolment).where(Enrolment.course_id == course.id, Enrolment.role.in_(STAFF_ROLES))
    ):
        session.add(Enrolment(user_id=enrolment.user_id, course_id=copy.id, role=enrolment.role))
    from server.core.exercises import sync_exercises  # which needs courses' folders

    sync_exercises(session, copy, course_catalogue(copy))
    session.flush()
    return copy


def archive_course(course: Course, archived: bool = True) -> None:
    course.archived_at = utcnow() if archived else None


def find_course(session: Session, slug: str) -> Course:
    course = session.scalar(select(Course).where(Course.slug == slug))
    if course is None:
        known = session.scalars(select(Course.slug).order_by(Course.slug)).all()
        raise CourseError(f"no course {slug}; the courses are: {', '.join(known) or 'none yet'}")
    return course


def open_courses(session: Session) -> list[Course]:
    """Every course not archived, by slug."""
    return list(
        session.scalars(select(Course).where(Course.archived_at.is_(None)).order_by(Course.slug))
    )


def enrol(session: Session, user: User, course: Course, role: str) -> Enrolment:
    """The user's role in the course, added or changed."""
    if role not in COURSE_ROLES:
        raise CourseError(f"role “{role}”: one of {', '.join(COURSE_ROLES)}")
    enrolment = session.scalar(
        select(Enrolment).where(Enrolment.user_id == user.id, Enrolment.course_id == course.id)
    )
    if enrolment is None:
        session.add(enrolment := Enrolment(user_id=user.id, course_id=course.id, role=role))
    else:
        enrolment.role = role
    session.flush()
    return enrolment


def role_in(session: Session, user_id: int, course_id: int) -> str | None:
    """The user's role in the course (an admin's is instructor everywhere); None: not in it."""
    found = session.execute(
        select(User.is_admin, Enrolment.role)
        .select_from(User)
        .outerjoin(Enrolment, (Enrolment.user_id == User.id) & (Enrolment.course_id == course_id))
        .where(User.id == user_id)
    ).first()
    if found is None:
        return None
    return CourseRole.instructor.value if found.is_admin else found.role


def courses_of(session: Session, user: User) -> list[tuple[Course, str]]:
    """The courses the user may open and their role in each (an admin: every course), newest
    edition first (by the years its edition names, "2026" or "2025-26", then by creation), the
    archived last."""
    if user.is_admin:
        found = [
            (course, CourseRole.instructor.value) for course in session.scalars(select(Course))
        ]
    else:
        found = list(
            session.execute(
                select(Course, Enrolment.role)
                .join(Enrolment, Enrolment.course_id == Course.id)
                .where(Enrolment.user_id == user.id)
            )
        )
    return sorted(found, key=lambda pair: _newest_first(pair[0]))


def _newest_first(course: Course) -> tuple:
    years = [int(year) for year in re.findall(r"\d{4}", course.edition or "")]
    return (
        course.archived_at is not None,
        not years,  # an edition that names no year after those that do
        sorted((-year for year in years)),
        -course.created_at.timestamp(),
        course.slug,
    )


def course_settings(course: Course) -> dict[str, Any]:
    """The course's settings as an admin sees them (for the command line's `show`)."""
    return {
        "slug": course.slug,
        **{key: getattr(course, key) for key in SETTINGS},
        "archived": course.archived_at is not None,
    }
