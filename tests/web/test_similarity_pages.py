"""Code similarity for the staff (server/web/similarity.py, server/core/similarity.py): who may
see it, comparing each student's counted submission through the queue and the worker's task,
the pairs ranked and one pair side by side, and the words that say it is no grade."""

import contextlib
import datetime as dt
import re

import pytest
from helpers import logged_in
from similar_programs import APART, REFERENCE, RENAMED
from sqlalchemy import func, select

from server.core.models import Exercise, SimilarityRun, User, utcnow
from server.core.queue import broker_transport
from server.core.users import add_user
from server.web.submissions import Rules, accept

SLUG = "autograd-saved-hooks"
PAGE = f"/courses/pytorch/staff/exercises/{SLUG}/similarity"


@contextlib.contextmanager
def database(app):
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        yield session
        session.commit()
        session.close()


def submitted(app, username: str, code: str, score: float | None) -> int:
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == SLUG))
        submission = accept(
            session, user, exercise, "work.py", code.encode(), Rules(10**6, 100, 60), utcnow()
        )
        if score is not None:
            submission.status, submission.score, submission.max_score = "graded", score, 10.0
        session.flush()
        return submission.id


@pytest.fixture
def staffed(course):
    """The course with prof (an instructor), ta and a third student, cara."""
    with database(course) as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "ta", "Teo", "t@uni.es", "ta", "long-password")
        add_user(session, "cara", "Cara", "c@uni.es", "student", "long-password")
    return course


@pytest.fixture
def submissions(staffed):
    """Ana's best (the reference) counts, not her first; Bea's is the reference renamed; Cara's,
    not graded yet, counts as her latest; the instructor's own is no student's."""
    return {
        "ana_first": submitted(staffed, "ana", APART[0], 4),
        "ana_best": submitted(staffed, "ana", REFERENCE, 9),
        "bea": submitted(staffed, "bea", RENAMED, 7),
        "cara": submitted(staffed, "cara", APART[1], None),
        "prof": submitted(staffed, "prof", REFERENCE, 10),
    }


@pytest.fixture
def folder_broker(staffed, tmp_path):
    """The portal's queue in a folder, as the demo's: what it sends is there to read."""
    folder = tmp_path / "broker"
    staffed.extensions["celery"].conf.update(
        broker_url="filesystem://localhost/",
        broker_transport=broker_transport("filesystem://localhost/"),
        broker_transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(tmp_path / "control"),
        },
    )
    return folder


def runs(app) -> int:
    with database(app) as session:
        return session.scalar(select(func.count()).select_from(SimilarityRun))


def test_a_student_sees_no_similarity_page(submissions, staffed):
    student, token = logged_in(staffed, "ana")
    assert student.get(PAGE).status_code == 403
    assert student.post(PAGE, data={"csrf_token": token}).status_code == 403
    pair = f"{PAGE}/{submissions['ana_best']}-{submissions['bea']}"
    assert student.get(pair).status_code == 403
    assert runs(staffed) == 0


def test_the_exercise_page_leads_to_it_and_it_says_it_is_no_grade(staffed):
    staff, _token = logged_in(staffed, "ta")
    assert PAGE in staff.get(f"/courses/pytorch/staff/exercises/{SLUG}").text
    page = staff.get(PAGE)
    assert page.status_code == 200
    assert "A lead for a person to read, never a grade." in page.text
    assert "have not been compared yet" in page.text and "Compare the submissions" in page.text
    es, _token = logged_in(staffed, "prof", lang="es")
    assert "Una pista para que la lea una persona, nunca una nota." in es.get(PAGE).text


def test_with_the_queue_away_nothing_is_left_waiting(staffed, submissions):
    staff, token = logged_in(staffed, "prof")
    answer = staff.post(PAGE, data={"csrf_token": token}, follow_redirects=True)
    assert "cannot be compared now" in answer.text
    assert runs(staffed) == 0
    assert "Compare the submissions" in answer.text


def test_a_comparison_goes_through_the_queue_and_its_pairs_are_ranked(
    staffed, submissions, folder_broker
):
    from worker.grading import tasks

    staff, token = logged_in(staffed, "ta")
    answer = staff.post(PAGE, data={"csrf_token": token}, follow_redirects=True)
    assert "being compared" in answer.text and "Compare again" not in answer.text
    sent = [path.read_text() for path in folder_broker.iterdir()]
    assert len(sent) == 1 and "hpcgrade.similarity" in sent[0]
    # asked again while it is under way: the same comparison, no second message
    staff.post(PAGE, data={"csrf_token": token})
    assert len(list(folder_broker.iterdir())) == 1 and runs(staffed) == 1
    with database(staffed) as session:
        run_id = session.scalar(select(SimilarityRun.id))
    assert tasks.similarity(run_id) == 3  # one per student: Ana's best, Bea's and Cara's

    page = staff.get(PAGE).text
    assert "3 counted submissions compared" in page and "asked by Teo" in page
    first_pair = f"{submissions['ana_best']}-{submissions['bea']}"
    listed = re.findall(r"/similarity/(\d+-\d+)\"", page)
    assert listed[0] == first_pair  # the copy first
    assert f"/submissions/{submissions['ana_first']}" not in page  # not her counted one
    # the instructor's own is in no pair (read from the links: the page's CSRF tokens, random
    # base64, hold a digit and a dash one time in 150)
    compared = {int(i) for pair in listed for i in pair.split("-")}
    assert submissions["prof"] not in compared and "Pilar" not in page

    side_by_side = staff.get(f"{PAGE}/{first_pair}")
    assert side_by_side.status_code == 200
    assert "never a grade" in side_by_side.text
    assert side_by_side.text.count('<mark class="alike">') >= 2
    assert "Ana García" in side_by_side.text and "Bea" in side_by_side.text
    assert staff.get(f"{PAGE}/{submissions['ana_first']}-{submissions['bea']}").status_code == 404

    # computed again: the new comparison replaces the last one, and one whose worker was lost
    with database(staffed) as session:
        exercise = session.scalar(select(Exercise).where(Exercise.slug == SLUG))
        lost = utcnow() - dt.timedelta(hours=1)
        session.add(SimilarityRun(exercise_id=exercise.id, requested_at=lost))
    staff.post(PAGE, data={"csrf_token": token})  # the lost one is no longer under way
    with database(staffed) as session:
        newer = session.scalar(select(func.max(SimilarityRun.id)))
    assert newer != run_id and tasks.similarity(newer) == 3 and runs(staffed) == 1


def test_another_courses_staff_gets_nothing(staffed, submissions):
    staff, _token = logged_in(staffed, "ta")
    other = PAGE.replace("/courses/pytorch/", "/courses/nope/")
    assert staff.get(other).status_code == 404
    assert staff.get(PAGE.replace(SLUG, "no-such-exercise")).status_code == 404
