"""Scores as every page writes them (the `points` and `out_of` filters, in the reader's way of
writing numbers), what an exercise is out of (its checks' points, read once per change of its
folder, else the largest maximum it was graded out of) and the rule of a student's grade."""

import datetime as dt
import os
import shutil

import pytest
from flask_babel import force_locale
from helpers import new_course

from server.core.catalogue import current_info, default_root
from server.core.grades import Grade, maximum_points
from server.core.models import Exercise, SetGrade, Submission, User
from server.web.i18n import out_of, points

NOON = dt.datetime(2026, 11, 23, 12, tzinfo=dt.timezone.utc)


def test_points_are_written_as_the_reader_writes_numbers(app):
    with app.test_request_context():
        with force_locale("en"):
            assert [points(8.0), points(7.5), points(7.456), points(-0.001), points(None)] == [
                "8",
                "7.5",
                "7.46",
                "0",
                "—",
            ]
            assert [out_of(7.5, 10), out_of(8, None), out_of(None, 10)] == ["7.5 / 10", "8", "—"]
        with force_locale("es"):
            assert out_of(7.5, 12.25) == "7,5 / 12,25"


@pytest.fixture
def exercises_root(tmp_path, monkeypatch):
    """A copy of the course's exercises, for tests that change one."""
    root = tmp_path / "exercises"
    shutil.copytree(default_root(), root)
    monkeypatch.setenv("HPCGRADE_EXERCISES", str(root))
    return root


def test_points_given_by_a_name_leave_the_maximum_to_the_grader(exercises_root, db_session):
    checks = exercises_root / "autograd-q" / "checks.py"
    checks.write_text("POINTS = 12\n" + checks.read_text().replace("points=", "points=POINTS or "))
    student = User(username="ana", name="Ana", email="a@uni.es", password_hash="x")
    course = new_course(db_session)  # of the copy's folder: HPCGRADE_EXERCISES names it
    rows = {
        slug: Exercise(course_id=course.id, slug=slug, title_en=slug, title_es=slug)
        for slug in ("autograd-q", "metrics", "gone")
    }
    db_session.add_all([student, *rows.values()])
    db_session.flush()
    for slug, maximum in (("autograd-q", 12.0), ("autograd-q", 11.0), ("metrics", 99.0)):
        db_session.add(
            Submission(
                user_id=student.id,
                exercise_id=rows[slug].id,
                filename="w.py",
                code=b"",
                sha256="0" * 64,
                status="graded",
                score=1.0,
                max_score=maximum,
            )
        )
    db_session.flush()
    maxima = maximum_points(db_session, list(rows.values()))
    # the largest maximum graded where the checks cannot tell; the catalogue's otherwise, and
    # nothing before a grade for a folder that is gone
    assert [maxima[rows[slug].id] for slug in ("autograd-q", "metrics", "gone")] == [
        12.0,
        10.0,
        None,
    ]


def test_a_folder_is_read_again_only_when_it_changes(exercises_root):
    first = current_info(exercises_root / "metrics")
    assert current_info(exercises_root / "metrics") is first and first.max_points == 10
    checks = exercises_root / "metrics" / "checks.py"
    checks.write_text(checks.read_text().replace("points=", "points=1 + "))
    later = os.stat(checks).st_mtime_ns + 1_000_000_000
    os.utime(checks, ns=(later, later))
    assert current_info(exercises_root / "metrics").max_points is None


def test_a_grade_is_the_best_counted_score_unless_an_instructor_set_the_grade():
    grade = Grade()
    grade.add(1, 6.0, 10.0, adjusted=False)
    grade.add(2, 9.0, 10.0, adjusted=False)
    assert (grade.score, grade.submission_id, grade.set_by_hand) == (9.0, 2, False)
    grade.add(3, 9.5, 10.0, adjusted=True)  # an adjusted score competes like any other
    assert (grade.score, grade.submission_id, grade.best_adjusted) == (9.5, 3, True)
    grade.add(4, 9.5, 10.0, adjusted=False)  # a tie: the earlier one stays the best
    grade.add(5, None, None, adjusted=False)  # not graded yet
    assert grade.submission_id == 3
    grade.set_by(SetGrade(score=0.0, comment="Copied.", set_at=NOON), 12.0)
    assert (grade.score, grade.submission_id, grade.best_id, grade.max_score) == (
        0.0,
        None,
        3,
        12.0,
    )
    grade.add(6, 10.0, 10.0, adjusted=False)  # whatever is submitted after
    assert (grade.score, grade.submission_id, grade.best) == (0.0, None, 10.0)
