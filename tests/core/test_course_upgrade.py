"""Migration 0010 on a copy of a populated one-course database: it becomes the course COURSE
names, with every grade, submission, exception, grade set by hand and token as before."""

import datetime as dt

import sqlalchemy as sa
from sqlalchemy.orm import Session
from test_database import insert

from server.core import migrate
from server.core.models import (
    Allowance,
    ApiToken,
    Course,
    Enrolment,
    Exercise,
    SetGrade,
    Submission,
    User,
)

NOON = dt.datetime(2026, 11, 20, 12, tzinfo=dt.timezone.utc)


def populate(connection) -> dict[str, int]:
    """A course of 0009's schema: a student with two graded submissions, an exception and a
    token; an instructor who set a grade and adjusted a score; an admin."""
    ids = {
        name: insert(
            connection,
            "users",
            username=name,
            name=name.title(),
            email=f"{name}@uni.es",
            password_hash=f"hash-{name}",
            role=role,
        )
        for name, role in (
            ("ana", "student"),
            ("bea", "student"),
            ("prof", "instructor"),
            ("root", "admin"),
        )
    }
    for slug in ("autograd-q", "metrics"):
        ids[slug] = insert(
            connection, "exercises", slug=slug, title_en=slug, title_es=slug, version="v" * 64
        )
    for name, slug, score, override in (
        ("ana", "autograd-q", 4, None),
        ("ana", "autograd-q", 9, 7),
        ("bea", "metrics", 3, None),
    ):
        insert(
            connection,
            "submissions",
            user_id=ids[name],
            exercise_id=ids[slug],
            filename="w.py",
            code=b"x = 1\n",
            sha256="0" * 64,
            status="graded",
            score=score,
            max_score=10,
            override_score=override,
            override_by=override and ids["prof"],
            override_comment=override and "partial credit",
            override_at=override and NOON,
        )
    insert(
        connection,
        "allowances",
        user_id=ids["ana"],
        exercise_id=ids["metrics"],
        deadline=NOON,
        extra_attempts=2,
        comment="ill",
        granted_by=ids["prof"],
        granted_at=NOON,
    )
    insert(
        connection,
        "set_grades",
        user_id=ids["bea"],
        exercise_id=ids["autograd-q"],
        score=8,
        comment="agreed",
        set_by=ids["prof"],
        set_at=NOON,
    )
    insert(
        connection,
        "api_tokens",
        user_id=ids["ana"],
        token_hash="t" * 64,
        label="laptop",
        created_at=NOON,
        expires_at=NOON + dt.timedelta(days=120),
    )
    return ids


def snapshot(connection) -> dict:
    """Every row that must come through the upgrade unchanged, as plain values."""
    tables = {
        "submissions": "id, user_id, exercise_id, score, override_score, override_comment",
        "allowances": "user_id, exercise_id, deadline, extra_attempts, comment",
        "set_grades": "user_id, exercise_id, score, comment, set_by",
        "api_tokens": "user_id, token_hash, label, expires_at",
        "users": "id, username, password_hash, session_version",
        "exercises": "id, slug, version",
    }
    return {
        table: sorted(
            tuple(row) for row in connection.execute(sa.text(f"SELECT {columns} FROM {table}"))
        )
        for table, columns in tables.items()
    }


def test_a_course_of_one_installation_becomes_the_course_its_setting_names(empty_database_url):
    from server.web.course import standings

    migrate.upgrade(empty_database_url, "0009")
    engine = sa.create_engine(empty_database_url)
    with engine.begin() as connection:
        ids = populate(connection)
        before = snapshot(connection)
    migrate.upgrade(empty_database_url, course="torch-2026")
    with engine.connect() as connection:
        assert snapshot(connection) == before
    with Session(engine) as session:
        (course,) = session.scalars(sa.select(Course)).all()
        assert (course.slug, course.exercises_dir, course.course_python) == (
            "torch-2026",
            None,
            None,
        )  # the service's folder and venv, as before
        assert {e.slug: e.course_id for e in session.scalars(sa.select(Exercise))} == {
            "autograd-q": course.id,
            "metrics": course.id,
        }
        roles = {(e.user_id, e.course_id): e.role for e in session.scalars(sa.select(Enrolment))}
        assert roles == {
            (ids["ana"], course.id): "student",
            (ids["bea"], course.id): "student",
            (ids["prof"], course.id): "instructor",
        }
        assert {u.username for u in session.scalars(sa.select(User).where(User.is_admin))} == {
            "root"
        }
        grades = {
            (user, exercise): standing.score
            for (user, exercise), standing in standings(session, course.id).items()
        }
        assert grades == {
            (ids["ana"], ids["autograd-q"]): 7,
            (ids["bea"], ids["metrics"]): 3,
            (ids["bea"], ids["autograd-q"]): 8,
        }
        assert session.scalar(sa.select(sa.func.count()).select_from(Allowance)) == 1
        assert session.scalar(sa.select(sa.func.count()).select_from(SetGrade)) == 1
        assert session.scalar(sa.select(ApiToken.label)) == "laptop"
        assert session.scalar(sa.select(sa.func.count()).select_from(Submission)) == 3
    migrate.downgrade(empty_database_url, "0009")  # and back, each role as it was
    with engine.connect() as connection:
        assert snapshot(connection) == before
        assert dict(connection.execute(sa.text("SELECT username, role FROM users")).all()) == {
            "ana": "student",
            "bea": "student",
            "prof": "instructor",
            "root": "admin",
        }
    engine.dispose()


def test_an_empty_database_gets_no_course(empty_database_url):
    """A new installation makes its courses itself (`hpcgrade courses create`)."""
    migrate.upgrade(empty_database_url, course="torch-2026")
    engine = sa.create_engine(empty_database_url)
    with engine.connect() as connection:
        assert connection.scalar(sa.text("SELECT count(*) FROM courses")) == 0
    engine.dispose()
