"""The course's staff pages: each feature's blueprint is made here, under
/courses/<course>/staff, with the one check they all share (the course's teaching assistants and
instructors, and admins; a student gets 403). What changes a course's settings or everyone's
grades is narrowed further in its view (auth.instructor_required)."""

from flask import Blueprint

from server.web.auth import staff_required

PREFIX = "/courses/<course>/staff"


def staff_blueprint(name: str, import_name: str, path: str = "") -> Blueprint:
    """A blueprint of staff pages at PREFIX + `path`."""
    blueprint = Blueprint(name, import_name, url_prefix=PREFIX + path)
    blueprint.before_request(staff_required(_staff_only))
    return blueprint


def _staff_only() -> None:
    """Nothing more to do: staff_required has refused everyone else."""
