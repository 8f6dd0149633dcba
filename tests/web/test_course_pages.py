"""A student's pages in a service of several courses: where one lands, what another course's
pages are (nothing: 404), and an archived course (read, not changed)."""

import io
import re

import pytest
from helpers import REFERENCE_Q, logged_in, new_course
from sqlalchemy import select

from server.core.courses import archive_course, enrol
from server.core.exercises import sync_exercises
from server.core.models import Course, Submission, User
from server.core.users import add_user


@pytest.fixture
def two_courses(course, catalogue):
    """`course` (pytorch: ana and bea students) and mpi (the same exercises' folder): ana in
    both, carl in mpi only, dan in none, prof an instructor and tara a teaching assistant of
    mpi; a submission of ana's in each."""
    database = course.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        mpi = new_course(session, "mpi", title_en="MPI", title_es="MPI", edition="2026")
        sync_exercises(session, mpi, catalogue)
        users = {u.username: u for u in session.scalars(select(User))}
        enrol(session, users["ana"], mpi, "student")
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password", course=mpi)
        add_user(session, "prof", "Prof", "p@uni.es", "instructor", "long-password", course=mpi)
        add_user(session, "tara", "Tara", "t@uni.es", "ta", "long-password", course=mpi)
        session.add(
            User(
                username="dan",
                name="Dan",
                email="d@uni.es",
                password_hash=users["ana"].password_hash,
            )
        )
    ids = {}
    client, token = logged_in(course, "ana")
    for slug in ("pytorch", "mpi"):
        sent = client.post(
            f"/courses/{slug}/exercises/autograd-q/submissions",
            data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
        )
        assert sent.status_code == 303, sent.text
        ids[slug] = int(sent.headers["Location"].rsplit("/", 1)[1])
    return course, ids


def test_one_course_lands_in_it_several_are_listed_none_is_said(two_courses):
    app, _ids = two_courses
    bea, _ = logged_in(app, "bea")
    assert bea.get("/").headers["Location"] == "/courses/pytorch/"
    prof, _ = logged_in(app, "prof")
    assert prof.get("/").headers["Location"] == "/courses/mpi/staff/"
    ana, _ = logged_in(app, "ana")
    listed = ana.get("/").text
    assert 'href="/courses/pytorch/"' in listed and 'href="/courses/mpi/"' in listed
    dan, _ = logged_in(app, "dan")
    assert "You are in no course yet" in dan.get("/").text


def test_a_student_of_both_sees_each_course_apart(two_courses):
    app, ids = two_courses
    ana, _ = logged_in(app, "ana")
    for slug, other in (("pytorch", "mpi"), ("mpi", "pytorch")):
        history = ana.get(f"/courses/{slug}/submissions").text
        assert f"/courses/{slug}/submissions/{ids[slug]}" in history
        assert f"/submissions/{ids[other]}" not in history
        assert ana.get(f"/courses/{slug}/submissions/{ids[slug]}").status_code == 200
        # a submission is found in its own course only
        assert ana.get(f"/courses/{slug}/submissions/{ids[other]}").status_code == 404
        assert ana.get(f"/courses/{slug}/submissions/{ids[other]}/status").status_code == 404


def portal_paths(app, course: str, submission_id: int) -> list[tuple[str, str]]:
    """(method, path) of every page of the portal in `course`."""
    values = {"slug": "autograd-q", "name": "starter.py", "submission_id": submission_id}
    found = []
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("portal."):
            path = rule.rule.replace("<course>", course)
            path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: str(values[m.group(1)]), path)
            found += [(method, path) for method in rule.methods - {"HEAD", "OPTIONS"}]
    return found


def test_another_courses_pages_do_not_exist_for_a_user_not_in_it(two_courses):
    app, ids = two_courses
    carl, token = logged_in(app, "carl")  # in mpi only
    paths = portal_paths(app, "pytorch", ids["pytorch"])
    assert len(paths) >= 7
    for method, path in paths:
        reply = carl.open(path, method=method, data={"csrf_token": token})
        assert reply.status_code == 404, (method, path, reply.status_code)
    for staff in ("prof", "tara"):  # mpi's instructor and teaching assistant: no one in pytorch
        client, token = logged_in(app, staff)
        for method, path in paths:
            reply = client.open(path, method=method, data={"csrf_token": token})
            assert reply.status_code == 404, (staff, method, path, reply.status_code)
    prof, _ = logged_in(app, "prof")
    assert prof.get(f"/courses/mpi/submissions/{ids['mpi']}").status_code == 200  # his course's
    assert logged_in(app, "ana")[0].get("/courses/no-such-course/").status_code == 404
    for slug in ("pytorch", "no-such-course"):  # to someone not logged in, alike
        anonymous = app.test_client().get(f"/courses/{slug}/exercises/autograd-q")
        assert anonymous.status_code == 302
        assert anonymous.headers["Location"] == f"/login?next=/courses/{slug}/exercises/autograd-q"


def test_an_archived_course_is_read_not_changed(two_courses):
    app, ids = two_courses
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        archive_course(session.scalar(select(Course).where(Course.slug == "mpi")))
    ana, token = logged_in(app, "ana")
    assert ana.get(f"/courses/mpi/submissions/{ids['mpi']}").status_code == 200
    assert "archived" in ana.get("/").text
    refused = ana.post(
        "/courses/mpi/exercises/autograd-q/submissions",
        data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    assert refused.status_code == 403 and "archived" in refused.text
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.scalar(select(Submission.id).order_by(Submission.id.desc())) == ids["mpi"]


def test_the_addresses_of_before_courses_lead_to_the_page_in_its_course(two_courses):
    app, ids = two_courses
    ana, _ = logged_in(app, "ana")
    moved = ana.get(f"/submissions/{ids['mpi']}")
    assert (
        moved.status_code == 302
        and moved.headers["Location"] == f"/courses/mpi/submissions/{ids['mpi']}"
    )
    assert ana.get("/exercises/autograd-q").headers["Location"] == "/"  # in both: she picks
    bea, _ = logged_in(app, "bea")
    assert (
        bea.get("/exercises/autograd-q").headers["Location"]
        == "/courses/pytorch/exercises/autograd-q"
    )
    assert bea.get(f"/submissions/{ids['mpi']}").status_code == 404  # not hers, not her course
    assert bea.get("/exercises/no-such-one").status_code == 404
    prof, _ = logged_in(app, "prof")  # staff of mpi
    assert prof.get(f"/submissions/{ids['mpi']}").status_code == 302
    assert prof.get(f"/submissions/{ids['pytorch']}").status_code == 404


def test_staff_find_the_student_page_of_a_students_file_and_none_of_their_own(two_courses):
    app, ids = two_courses
    prof, token = logged_in(app, "prof")
    sent = prof.post(
        "/courses/mpi/exercises/autograd-q/submissions",
        data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    own = prof.get(sent.headers["Location"]).text
    assert "/staff/students/prof" not in own and "/staff/students/prof/exercises" not in own
    students = prof.get(f"/courses/mpi/submissions/{ids['mpi']}").text
    assert 'href="/courses/mpi/staff/students/ana"' in students
    assert 'href="/courses/mpi/staff/students/ana/exercises/autograd-q"' in students
