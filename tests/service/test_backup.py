"""A backup restored as docs/operations.md says (pg_dump's custom format, pg_restore into a new,
empty database) is the service it was: grades kept, and a submission that was queued when the
backup was taken is graded after the restore, from the restored database alone."""

import subprocess

import pytest
import sqlalchemy as sa
from helpers import REFERENCE_Q, dispatcher, postgres_database, queue_submission

from server.core.db import Database
from server.core.models import Submission

pytestmark = [pytest.mark.services, pytest.mark.postgresql_only]


def libpq(url: str) -> str:
    """A SQLAlchemy URL as PostgreSQL's own tools read it."""
    return sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def statuses(database: Database) -> dict[int, tuple[str, float | None]]:
    with database.sessions() as session:
        rows = session.execute(sa.select(Submission.id, Submission.status, Submission.score))
        return {row.id: (row.status, row.score) for row in rows}


def test_a_backup_restored_into_a_new_database_grades_on(database, executor, catalogue, tmp_path):
    graded = queue_submission(database, REFERENCE_Q)
    dispatcher(database, executor, catalogue).dispatch()
    waiting = queue_submission(database, REFERENCE_Q)
    dump = tmp_path / "hpcgrade.dump"
    subprocess.run(
        ["pg_dump", "--format=custom", "--file", str(dump), libpq(str(database.engine.url))],
        check=True,
        timeout=120,
    )
    for url in postgres_database():
        subprocess.run(
            ["pg_restore", "--no-owner", "--exit-on-error", "--dbname", libpq(url), str(dump)],
            check=True,
            timeout=120,
        )
        restored = Database(url)
        try:
            assert statuses(restored) == {graded: ("graded", 10.0), waiting: ("queued", None)}
            dispatcher(restored, executor, catalogue).dispatch()
            assert statuses(restored)[waiting] == ("graded", 10.0)
        finally:
            restored.dispose()
