"""A job's shape as batching sees it: the Slurm resources, and what differs between courses.

Runs of equal shapes may share a job. Two courses have different venvs, accounts, job names,
`--comment` and `--wckey`, so their shapes differ even where their resources do not, and their
runs never share a job (nor a pilot). An exercise's `[slurm]` applies on top of its course's
shape (ExerciseInfo.resources keeps the type and the course's fields).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from server.core.config import Resources, Settings
from server.core.courses import job_names
from server.core.models import Course


@dataclass(frozen=True)
class Shape(Resources):
    """`python`: the course venv's python; None: the service's COURSE_PYTHON (which the
    executor holds)."""

    course: str = "hpcgrade"
    python: str | None = None
    job_name: str = "hpcgrade-hpcgrade"
    comment: str = "hpcgrade hpcgrade"
    wckey: str = "hpcgrade"

    @property
    def pilot_name(self) -> str:
        return f"{self.job_name}-pilot"


def course_shape(course: Course, default: Resources) -> Shape:
    """The course's shape before an exercise's `[slurm]`: `default` (the SLURM_* settings) with
    the course's table on top, its python, job name, comment and wckey."""
    name, comment, wckey = job_names(course)
    return with_resources(
        default.override(course.slurm or {}, f"course {course.slug} slurm"),
        course=course.slug,
        python=course.course_python,
        job_name=name,
        comment=comment,
        wckey=wckey,
    )


def service_shape(settings: Settings) -> Shape:
    """The shape of jobs that belong to no course (`hpcgrade grade --executor slurm`): the
    SLURM_* settings, COURSE_PYTHON, and names made of the COURSE setting."""
    return with_resources(
        settings.slurm_resources,
        course=settings.course,
        python=settings.course_python,
        job_name=f"hpcgrade-{settings.course}",
        comment=f"hpcgrade {settings.course}",
        wckey=settings.course,
    )


def with_resources(resources: Resources, **course) -> Shape:
    """These resources, with what differs per course."""
    return Shape(
        **{field.name: getattr(resources, field.name) for field in dataclasses.fields(Resources)},
        **course,
    )
