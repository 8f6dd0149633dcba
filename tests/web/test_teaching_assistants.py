"""Teaching assistants: accommodations are the instructors' unless the course lets its TAs give
them (a course setting, on the admin's course form and `hpcgrade courses`); TAs still set
grades, and the student reads who set a grade by role, never "an instructor" for a TA's."""

import re

import pytest
import sqlalchemy as sa
from helpers import logged_in

from server.core.courses import find_course
from server.core.models import Accommodation, Course, SetGrade
from server.core.users import add_user

STAFF = "/courses/pytorch/staff"
SLUG = "autograd-q"


@pytest.fixture
def staffed(course):
    """The course with teo, a teaching assistant, prof, an instructor, and root, an admin."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        pytorch = find_course(session, "pytorch")
        add_user(session, "teo", "Teo", "t@uni.es", "ta", "long-password", course=pytorch)
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "root", "Root", "r@uni.es", "admin", "long-password")
        session.commit()
        session.close()
    return course


def bearer(app, username) -> dict:
    answer = app.test_client().post(
        "/api/v1/tokens", json={"username": username, "password": "long-password"}
    )
    return {"Authorization": "Bearer " + answer.json["token"]}


def rows(app, model):
    with app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalars(sa.select(model)).all()


def let_tas(app, allowed: bool) -> None:
    with app.extensions["hpcgrade.db"].sessions() as session:
        session.execute(sa.update(Course).values(tas_grant_accommodations=allowed))
        session.commit()


def accommodate(client, token, username="ana"):
    return client.post(
        f"{STAFF}/students/{username}/accommodation",
        data={"csrf_token": token, "extra_days": "3", "attempts_factor": "1", "comment": ""},
    )


def set_grade(client, token, username="ana"):
    return client.post(
        f"{STAFF}/students/{username}/exercises/{SLUG}/grade",
        data={"csrf_token": token, "score": "4", "comment": "Agreed in the lab."},
    )


def test_a_teaching_assistant_gives_no_accommodation_by_default(staffed):
    teo, token = logged_in(staffed, "teo")
    assert teo.get(f"{STAFF}/students/ana/accommodation").status_code == 403
    assert accommodate(teo, token).status_code == 403
    assert teo.get(f"{STAFF}/students/ana/accommodation/remove").status_code == 403
    assert rows(staffed, Accommodation) == []
    page = teo.get(f"{STAFF}/students/ana").text
    assert "/students/ana/accommodation" not in page
    assert "instructors give accommodations." in page
    # exceptions on one exercise and grades set by hand stay theirs
    assert set_grade(teo, token).status_code == 303
    assert [row.score for row in rows(staffed, SetGrade)] == [4]
    prof, prof_token = logged_in(staffed, "prof")
    assert "/students/ana/accommodation" in prof.get(f"{STAFF}/students/ana").text
    assert accommodate(prof, prof_token).status_code == 303
    assert [row.extra_days for row in rows(staffed, Accommodation)] == [3]


def test_a_course_that_lets_its_tas_gets_their_accommodations(staffed):
    let_tas(staffed, True)
    teo, token = logged_in(staffed, "teo")
    assert "/students/ana/accommodation" in teo.get(f"{STAFF}/students/ana").text
    assert accommodate(teo, token).status_code == 303
    assert teo.post(
        f"{STAFF}/students/ana/accommodation/remove", data={"csrf_token": token}
    ).status_code in (302, 303)
    assert rows(staffed, Accommodation) == []


@pytest.mark.parametrize(
    ("setter", "lang", "said", "never"),
    [
        ("teo", "en", "set by a teaching assistant", "set by an instructor"),
        (
            "teo",
            "es",
            "puesta por un profesor ayudante",
            r"puesta por un profesor(?! ayudante)",
        ),
        ("prof", "en", "set by an instructor", "set by a teaching assistant"),
        ("prof", "es", "puesta por un profesor", "puesta por un profesor ayudante"),
        ("root", "en", "set by an instructor", "set by a teaching assistant"),
    ],
)
def test_the_student_reads_who_set_their_grade_by_role(staffed, setter, lang, said, never):
    client, token = logged_in(staffed, setter)
    assert set_grade(client, token).status_code == 303
    ana, _ = logged_in(staffed, "ana", lang=lang)
    for path in (
        f"/courses/pytorch/exercises/{SLUG}",
        f"/courses/pytorch/exercises/{SLUG}/attempts",
        "/courses/pytorch/",
    ):
        page = ana.get(path, follow_redirects=True).text.lower()
        assert said in page, path
        assert not re.search(never, page), path


def test_the_api_says_whose_role_set_the_grade(staffed):
    teo, token = logged_in(staffed, "teo")
    set_grade(teo, token)
    exercises = staffed.test_client().get("/api/v1/exercises", headers=bearer(staffed, "ana")).json
    (listed,) = [e for e in exercises["exercises"] if e["slug"] == SLUG]
    assert listed["grade"]["set_by_instructor"]["by"] == "ta"


def test_a_score_a_teaching_assistant_adjusted_says_so(staffed):
    """It read "adjusted by an instructor" whoever adjusted it: the submission's pages, the API
    and the terminal's summary say the adjuster's role."""
    from test_allowances import graded, override

    from hpcgrade.summary import summary

    submission_id = graded(staffed, "ana", 4)
    teo, token = logged_in(staffed, "teo")
    override(teo, token, submission_id, "6")
    ana, _ = logged_in(staffed, "ana")
    for path in (f"/courses/pytorch/submissions/{submission_id}", "/courses/pytorch/submissions"):
        page = ana.get(path).text
        assert 'title="adjusted by a teaching assistant"' in page, path
        assert "adjusted by an instructor" not in page, path
    spanish = ana.get(f"/courses/pytorch/submissions/{submission_id}?lang=es").text
    assert "ajustada por un profesor ayudante" in spanish
    answer = (
        staffed.test_client()
        .get(f"/api/v1/submissions/{submission_id}", headers=bearer(staffed, "ana"))
        .json
    )
    assert answer["override"]["by"] == "ta"
    assert "(adjusted by a teaching assistant)" in summary("work.py", answer).splitlines()[0]


def test_the_admin_form_sets_whether_tas_give_accommodations(staffed):
    root, token = logged_in(staffed, "root")
    page = root.get("/admin/courses/pytorch/edit").text
    assert (
        'name="tas_grant_accommodations"' in page
        and "checked" not in page.split('name="tas_grant_accommodations"')[1].split(">")[0]
    )
    fields = {
        "csrf_token": token,
        "title_en": "PyTorch",
        "deadline_policy": "none",
        "penalty_per_day": "0",
        "tas_grant_accommodations": "yes",
    }
    assert root.post("/admin/courses/pytorch/edit", data=fields).status_code == 303
    assert [c.tas_grant_accommodations for c in rows(staffed, Course)] == [True]
    page = root.get("/admin/courses/pytorch/edit").text
    assert " checked" in page.split('name="tas_grant_accommodations"')[1].split(">")[0]
    del fields["tas_grant_accommodations"]  # an unticked box is not sent
    assert root.post("/admin/courses/pytorch/edit", data=fields).status_code == 303
    assert [c.tas_grant_accommodations for c in rows(staffed, Course)] == [False]
