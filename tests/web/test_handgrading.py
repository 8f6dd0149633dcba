"""Grading by hand (server/web/handgrading.py): the order a grader goes through an exercise's
submissions in, which stays put while scores change; the score form that comes back to it; the
comments saved to give again; and who may use it."""

import contextlib
import re

import pytest
from helpers import logged_in
from sqlalchemy import select

from server.core.models import Exercise, SavedComment, User, utcnow
from server.core.users import add_user
from server.web.submissions import Rules, accept

CODE = "def q_grads(a, b, v):\n    return a, b\n"
STAFF = "/courses/pytorch/staff/submissions/{}"
PAGE = STAFF + "/hand-grading"


@contextlib.contextmanager
def database(app):
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        yield session
        session.commit()
        session.close()


@pytest.fixture
def staffed(course):
    """The course with prof (an instructor), ta and a third student, Álvaro Álvarez, whose family
    name comes before Ana's and Bea's (García, Martín: a name sorts without its accents)."""
    with database(course) as session:
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "ta", "Teo", "t@uni.es", "ta", "long-password")
        add_user(session, "zalvaro", "Álvaro Álvarez", "z@uni.es", "student", "long-password")
    return course


def graded(app, username, score, slug="autograd-q") -> int:
    with database(app) as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == slug))
        submission = accept(
            session, user, exercise, "work.py", CODE.encode(), Rules(1024, 100, 60), utcnow()
        )
        submission.status, submission.score, submission.max_score = "graded", score, 10.0
        session.flush()
        return submission.id


def neighbours(page: str) -> tuple[int | None, int | None]:
    """The previous and next submission a page links to (None: it has none)."""
    found = [
        re.search(rf'id="{which}-submission" rel="\w+" href="[^"]*/submissions/(\d+)/', page)
        for which in ("previous", "next")
    ]
    return tuple(int(match[1]) if match else None for match in found)


@pytest.fixture
def submissions(staffed):
    """Álvaro's one, Ana's two (the second, 8, counts) and Bea's one, in that order of names."""
    return {
        "alvaro": graded(staffed, "zalvaro", 6),
        "ana_first": graded(staffed, "ana", 4),
        "ana_best": graded(staffed, "ana", 8),
        "bea": graded(staffed, "bea", 5),
    }


def test_only_staff_get_in(staffed, submissions):
    student, token = logged_in(staffed, "ana")
    assert student.get(PAGE.format(submissions["ana_best"])).status_code == 403
    assert (
        student.post(
            STAFF.format(submissions["ana_best"]) + "/saved-comments",
            data={"csrf_token": token, "text": "mine"},
        ).status_code
        == 403
    )
    ta, _ = logged_in(staffed, "ta")
    assert ta.get(PAGE.format(submissions["ana_best"])).status_code == 200


def test_each_students_counted_submission_by_name(staffed, submissions):
    prof, _ = logged_in(staffed, "prof")
    page = prof.get(PAGE.format(submissions["ana_best"])).text
    assert neighbours(page) == (submissions["alvaro"], submissions["bea"])
    assert "2 of 3" in page and "def q_grads(a, b, v):" in page
    assert neighbours(prof.get(PAGE.format(submissions["alvaro"])).text) == (
        None,
        submissions["ana_best"],
    )
    assert neighbours(prof.get(PAGE.format(submissions["bea"])).text) == (
        submissions["ana_best"],
        None,
    )
    # an attempt that does not count still leads to the students around its own
    earlier = prof.get(PAGE.format(submissions["ana_first"])).text
    assert neighbours(earlier) == (submissions["alvaro"], submissions["bea"])
    assert "not in this order (3 in it)" in earlier


def test_every_submission_by_name_then_time(staffed, submissions):
    prof, _ = logged_in(staffed, "prof")
    page = prof.get(PAGE.format(submissions["ana_first"]) + "?order=all").text
    assert neighbours(page) == (submissions["alvaro"], submissions["ana_best"])
    assert "2 of 4" in page and "order=all" in page


def test_save_and_go_to_the_next_keeps_the_order_when_the_counted_one_changes(staffed, submissions):
    prof, token = logged_in(staffed, "prof")
    sent = prof.post(
        STAFF.format(submissions["ana_best"]) + "/override",
        data={
            "csrf_token": token,
            "score": "2",
            "comment": "Copied from the slides.",
            "then": "next",
            "order": "counted",
        },
    )
    assert sent.status_code == 303
    assert sent.headers["Location"].endswith(PAGE.format(submissions["bea"]) + "?order=counted")
    assert "is adjusted by hand" in prof.get(sent.headers["Location"]).text
    # Ana's first attempt (4) counts now: Bea's previous is Ana's, not Álvaro's
    assert neighbours(prof.get(PAGE.format(submissions["bea"])).text)[0] == submissions["ana_first"]
    stayed = prof.post(
        STAFF.format(submissions["bea"]) + "/override",
        data={"csrf_token": token, "score": "5", "comment": "Fine.", "then": "next"},
    )
    assert stayed.headers["Location"].endswith(PAGE.format(submissions["bea"]) + "?order=counted")
    # from the submission's own page the form still goes back there
    plain = prof.post(
        STAFF.format(submissions["bea"]) + "/override",
        data={"csrf_token": token, "score": "5", "comment": "Fine."},
    )
    assert plain.headers["Location"].endswith(f"/courses/pytorch/submissions/{submissions['bea']}")


def test_a_refused_score_shows_the_hand_grading_page_again_with_what_was_typed(
    staffed, submissions
):
    prof, token = logged_in(staffed, "prof")
    refused = prof.post(
        STAFF.format(submissions["bea"]) + "/override",
        data={
            "csrf_token": token,
            "score": "11",
            "comment": "Too generous",
            "then": "stay",
            "order": "all",
        },
    )
    assert refused.status_code == 400
    assert 'id="hand-grading"' in refused.text and "Too generous" in refused.text
    assert "The score must be a number from 0 to 10" in refused.text
    assert 'name="order" value="all"' in refused.text


def test_saved_comments_for_an_exercise_or_the_whole_course(staffed, submissions):
    prof, token = logged_in(staffed, "prof")
    here = STAFF.format(submissions["bea"])
    for text, scope in (("Use `v` as `gradient=`.", "exercise"), ("Well explained.", "course")):
        saved = prof.post(
            here + "/saved-comments", data={"csrf_token": token, "text": text, "scope": scope}
        )
        assert saved.status_code == 303 and saved.headers["Location"].endswith(
            PAGE.format(submissions["bea"]) + "?order=counted"
        )
    page = prof.get(PAGE.format(submissions["bea"])).text
    assert page.index("Use `v` as `gradient=`.") < page.index("Well explained.")
    assert 'data-text="Well explained."' in page
    elsewhere = prof.get(PAGE.format(graded(staffed, "bea", 3, slug="autograd-vjp"))).text
    assert "Well explained." in elsewhere and "gradient=" not in elsewhere

    assert (
        prof.post(here + "/saved-comments", data={"csrf_token": token, "text": "  "}).status_code
        == 303
    )
    with database(staffed) as session:
        comments = session.scalars(select(SavedComment).order_by(SavedComment.id)).all()
        assert [c.text for c in comments] == ["Use `v` as `gradient=`.", "Well explained."]
        assert comments[1].exercise_id is None and comments[0].saved_by is not None
        first = comments[0].id
    forgot = prof.post(here + f"/saved-comments/{first}/forget", data={"csrf_token": token})
    assert forgot.status_code == 303
    assert "gradient=" not in prof.get(PAGE.format(submissions["bea"])).text
    assert (
        prof.post(here + f"/saved-comments/{first}/forget", data={"csrf_token": token}).status_code
        == 404
    )


def test_the_submission_page_leads_there_and_the_page_has_no_inline_script(staffed, submissions):
    prof, _ = logged_in(staffed, "prof")
    submission_page = prof.get(f"/courses/pytorch/submissions/{submissions['bea']}").text
    assert PAGE.format(submissions["bea"]) in submission_page
    page = prof.get(PAGE.format(submissions["bea"])).text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/static/handgrading.js" defer>']
    assert "<kbd>n</kbd>" in page  # the keys are written on the page
    es = prof.get(PAGE.format(submissions["bea"]) + "?lang=es")
    assert es.status_code == 200 and 'lang="es"' in es.text


def test_the_exercises_staff_page_starts_it_at_the_first_student(staffed):
    prof, _ = logged_in(staffed, "prof")
    exercise_page = prof.get("/courses/pytorch/staff/exercises/autograd-q").text
    start = "/courses/pytorch/staff/exercises/autograd-q/hand-grading"
    assert f'href="{start}"' in exercise_page
    empty = prof.get(start, follow_redirects=True)
    assert "No student has submitted to this exercise yet" in empty.text
    first = graded(staffed, "zalvaro", 6)
    graded(staffed, "ana", 4)
    assert prof.get(start).headers["Location"].endswith(PAGE.format(first) + "?order=counted")
    assert prof.get(start + "?order=all").headers["Location"].endswith("?order=all")
    student, _ = logged_in(staffed, "ana")
    assert student.get(start).status_code == 403
