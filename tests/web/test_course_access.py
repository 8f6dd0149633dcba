"""Two courses in one service: every staff, exceptions and regrade page of one course is not
there (404) for the staff and students of the other, and a submission, regrade, student or
exercise of the other course is not found under this one's URLs either. Teaching assistants
grade by hand and grant exceptions; only instructors grade again. A student of both courses
sees each course's exercises and submissions, and each course counts only its own."""

import csv
import io
import re
import zipfile

import pytest
from course_data import submit
from flask import url_for
from helpers import CSRF_TOKEN, log_in, new_course
from sqlalchemy import select

from server.core.courses import enrol
from server.core.exercises import sync_exercises
from server.core.models import (
    Allowance,
    Course,
    Exercise,
    GradingRun,
    Regrade,
    SetGrade,
    Submission,
    User,
    utcnow,
)
from server.core.users import add_user
from server.web.regrade_preview import start

BLUEPRINTS = ("staff", "allowances", "regrade")
# the routes that grade again: a teaching assistant's answer is 403, whatever the ids
INSTRUCTORS_ONLY = {
    "regrade.start_preview",
    "regrade.publish_preview",
    "regrade.discard_preview",
    "regrade.resume_preview",
    "regrade.fresh_preview",
    "regrade.submission",
    # the instructors' unless the course lets its teaching assistants (these courses do not)
    "accommodations.accommodation",
    "accommodations.remove_accommodation",
}
CODE = "grad-sign-flipped"
# what each POST form needs to be taken (a grade, an exception)
FORM = {"score": "7", "comment": "Checked by hand.", "extra_attempts": "2", "deadline": ""}


@pytest.fixture
def two_courses(app, catalogue):
    """pytorch (A) and mpi (B), of the same exercises folder, and B's own halo-exchange.
    A: profa instructor, taa TA, stua student; B: profb instructor, stub student; both is a
    student of each. Graded autograd-q submissions: stua 6 and both 4 in A, both 9 and stub 8
    in B; a regrade open on each course's autograd-q. Returns the app and the ids by name."""
    database = app.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        a, b = new_course(session), new_course(session, "mpi", title_en="MPI", title_es="MPI")
        for course in (a, b):
            sync_exercises(session, course, catalogue)
        session.add(
            Exercise(
                course_id=b.id,
                slug="halo-exchange",
                title_en="Halo exchange",
                title_es="Intercambio de halos",
                position=99,
            )
        )
        people = {
            username: add_user(
                session,
                username,
                username.title(),
                f"{username}@uni.es",
                role,
                "long-password",
                course=course,
            )
            for username, role, course in (
                ("profa", "instructor", a),
                ("taa", "ta", a),
                ("stua", "student", a),
                ("profb", "instructor", b),
                ("stub", "student", b),
                ("both", "student", a),
            )
        }
        enrol(session, people["both"], b, "student")
        q = {
            course.slug: session.scalar(
                select(Exercise).where(
                    Exercise.course_id == course.id, Exercise.slug == "autograd-q"
                )
            )
            for course in (a, b)
        }
        made = {
            "stua": submit(session, people["stua"], q["pytorch"], 6, codes=[CODE]),
            "both-a": submit(session, people["both"], q["pytorch"], 4, codes=[CODE]),
            "both-b": submit(session, people["both"], q["mpi"], 9, codes=[CODE]),
            "stub": submit(session, people["stub"], q["mpi"], 8, codes=[CODE]),
        }
        regrades = {
            slug: Regrade(
                exercise_id=exercise.id, started_by=people["profa"].id, started_at=utcnow()
            )
            for slug, exercise in q.items()
        }
        session.add_all(regrades.values())
        session.flush()
        ids = {name: row.id for name, row in made.items()}
        ids |= {f"regrade-{slug}": row.id for slug, row in regrades.items()}
    return app, ids


def client_of(app, username: str):
    """A test client logged in as `username`, and its CSRF token."""
    client = app.test_client()
    assert log_in(client, username).status_code == 302
    return client, CSRF_TOKEN.search(client.get("/", follow_redirects=True).text).group(1)


def routes(app):
    """Every rule of the staff, exceptions and regrade pages, with the methods it answers."""
    return [
        (rule, sorted(rule.methods - {"HEAD", "OPTIONS"}))
        for rule in app.url_map.iter_rules()
        if rule.endpoint.split(".")[0] in BLUEPRINTS
    ]


def url(app, rule, values: dict) -> str:
    with app.test_request_context():
        return url_for(rule.endpoint, **{name: values[name] for name in rule.arguments})


def ask(client, token: str, method: str, path: str):
    if method == "GET":
        return client.get(path)
    return client.post(path, data={"csrf_token": token, **FORM})


def values_of(ids: dict, course: str) -> dict:
    """A route's arguments, all of them the course's."""
    return {
        "course": course,
        "slug": "autograd-q",
        "code": CODE,
        "username": "stua" if course == "pytorch" else "stub",
        "submission_id": ids["stua" if course == "pytorch" else "stub"],
        "regrade_id": ids[f"regrade-{course}"],
    }


def test_every_staff_route_walked_here_takes_arguments_known(two_courses):
    """The walks below fill every argument of every route: a new one must be added to them."""
    app, ids = two_courses
    assert len(routes(app)) > 15
    for rule, _methods in routes(app):
        assert rule.arguments <= set(values_of(ids, "mpi")), rule


@pytest.mark.parametrize("username", ["profa", "taa", "stua"])
def test_another_courses_staff_pages_are_not_there(two_courses, username):
    """Course B's every staff URL, as A's instructor, TA or student: 404, never a page, a
    redirect or a 403 that says it exists."""
    app, ids = two_courses
    client, token = client_of(app, username)
    for rule, methods in routes(app):
        path = url(app, rule, values_of(ids, "mpi"))
        for method in methods:
            assert ask(client, token, method, path).status_code == 404, (method, path)
    with app.extensions["hpcgrade.db"].sessions() as session:
        stub = session.scalar(select(User).where(User.username == "stub"))
        assert session.get(Submission, ids["stub"]).override_score is None
        assert session.scalars(select(SetGrade)).all() == []
        assert session.scalars(select(Allowance).where(Allowance.user_id == stub.id)).all() == []


def foreign_values(ids: dict) -> list[tuple[str, dict]]:
    """A's arguments with one of them B's: its submission, regrade, student (of B only) or
    exercise (halo-exchange is B's alone)."""
    own = values_of(ids, "pytorch")
    return [
        (name, {**own, name: value})
        for name, value in (
            ("submission_id", ids["both-b"]),
            ("regrade_id", ids["regrade-mpi"]),
            ("username", "stub"),
            ("slug", "halo-exchange"),
        )
    ]


@pytest.mark.parametrize("username", ["profa", "taa"])
def test_another_courses_ids_are_not_found_under_this_course(two_courses, username):
    """A's URLs naming B's submission (even one of a student of both), regrade, student or
    exercise: 404 (a TA's answer on a route that grades again is 403, whatever it names)."""
    app, ids = two_courses
    client, token = client_of(app, username)
    walked = 0
    for rule, methods in routes(app):
        for name, values in foreign_values(ids):
            if name not in rule.arguments:
                continue
            path = url(app, rule, values)
            expected = 403 if username == "taa" and rule.endpoint in INSTRUCTORS_ONLY else 404
            for method in methods:
                walked += 1
                assert ask(client, token, method, path).status_code == expected, (method, path)
    assert walked > 20
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.get(Submission, ids["both-b"]).override_score is None
        assert session.get(Regrade, ids["regrade-mpi"]).published_at is None


def test_this_courses_own_pages_open_for_its_staff(two_courses):
    """The walks' arguments of A are A's pages indeed: its instructor reads each of them."""
    app, ids = two_courses
    client, _ = client_of(app, "profa")
    for rule, methods in routes(app):
        if "GET" in methods:
            path = url(app, rule, values_of(ids, "pytorch"))
            assert client.get(path).status_code == 200, path


def test_a_student_page_is_only_for_the_courses_students(two_courses):
    app, ids = two_courses
    client, _ = client_of(app, "profa")
    page = client.get("/courses/pytorch/staff/students/both")
    assert page.status_code == 200 and f'/submissions/{ids["both-a"]}"' in page.text
    # B's submission and B's own exercise are not A's
    assert f'/submissions/{ids["both-b"]}"' not in page.text and "Halo exchange" not in page.text
    for username in ("stub", "profb", "taa", "nobody"):  # B's, staff, no one
        assert client.get(f"/courses/pytorch/staff/students/{username}").status_code == 404


def test_a_teaching_assistant_grades_by_hand_but_does_not_grade_again(two_courses):
    app, ids = two_courses
    ta, token = client_of(app, "taa")
    a = "/courses/pytorch/staff"
    form = {"csrf_token": token, **FORM}
    for path in (
        f"{a}/exercises/autograd-q/regrade",
        f"{a}/regrades/{ids['regrade-pytorch']}/publish",
        f"{a}/regrades/{ids['regrade-pytorch']}/discard",
        f"{a}/regrades/{ids['regrade-pytorch']}/resume",
        f"{a}/submissions/{ids['stua']}/regrade",
    ):
        assert ta.post(path, data=form).status_code == 403, path
    assert ta.get(f"{a}/submissions/{ids['stua']}/regrade").status_code == 403
    for path in (
        f"{a}/submissions/{ids['stua']}/override",
        f"{a}/students/stua/exercises/autograd-q/grade",
        f"{a}/students/both/exercises/metrics",
    ):
        assert ta.post(path, data=form).status_code == 303, path
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.get(Submission, ids["stua"]).override_score == 7
        assert [row.score for row in session.scalars(select(SetGrade))] == [7]
        assert [row.extra_attempts for row in session.scalars(select(Allowance))] == [2]
        regrade = session.get(Regrade, ids["regrade-pytorch"])
        assert regrade.published_at is None and regrade.discarded_at is None
    for path in (
        f"{a}/submissions/{ids['stua']}/override/remove",
        f"{a}/students/stua/exercises/autograd-q/grade/remove",
        f"{a}/students/both/exercises/metrics/remove",
    ):
        assert ta.post(path, data={"csrf_token": token}).status_code == 303, path
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.get(Submission, ids["stua"]).override_score is None
        assert session.scalars(select(SetGrade)).all() == []
        assert session.scalars(select(Allowance)).all() == []


def test_a_teaching_assistant_is_not_shown_what_only_instructors_do(two_courses):
    app, ids = two_courses
    pages = (
        "/courses/pytorch/staff/exercises/autograd-q",
        f"/courses/pytorch/submissions/{ids['stua']}",
        f"/courses/pytorch/staff/regrades/{ids['regrade-pytorch']}",
    )
    buttons = (
        "Grade all again</button>",
        '/regrade">Grade again',
        "Publish these grades",
        "Discard the preview",
    )
    ta, _ = client_of(app, "taa")
    prof, _ = client_of(app, "profa")
    ta_pages = "".join(ta.get(path).text for path in pages)
    prof_pages = "".join(prof.get(path).text for path in pages)
    assert [button in ta_pages for button in buttons] == [False] * 4
    assert [button in prof_pages for button in buttons[:3]] == [True] * 3  # nothing is graded yet
    assert "Adjust this submission" in ta_pages and "Stop grading" not in ta_pages


def test_a_student_of_two_courses_sees_each_with_its_own_submissions(two_courses):
    app, ids = two_courses
    both, _ = client_of(app, "both")
    home = both.get("/").text
    assert 'href="/courses/pytorch/"' in home and 'href="/courses/mpi/"' in home
    a, b = both.get("/courses/pytorch/").text, both.get("/courses/mpi/").text
    assert "Halo exchange" in b and "Halo exchange" not in a
    assert re.search(r"autograd-q\">.*?</tr>", a, re.S).group(0).count(">4 / ") == 1
    assert re.search(r"autograd-q\">.*?</tr>", b, re.S).group(0).count(">9 / ") == 1
    mine_a = both.get("/courses/pytorch/submissions").text
    mine_b = both.get("/courses/mpi/submissions").text
    assert (
        f'/submissions/{ids["both-a"]}"' in mine_a
        and f'/submissions/{ids["both-b"]}"' not in mine_a
    )
    assert (
        f'/submissions/{ids["both-b"]}"' in mine_b
        and f'/submissions/{ids["both-a"]}"' not in mine_b
    )
    assert both.get(f"/courses/pytorch/submissions/{ids['both-b']}").status_code == 404


def grades_of(client, course: str) -> dict[str, list[str]]:
    rows = csv.reader(io.StringIO(client.get(f"/courses/{course}/staff/grades.csv").text))
    return {row[0]: row for row in rows}


def test_each_courses_gradebook_counts_only_its_own(two_courses):
    """both's A grade is 4 and B's 9: neither course reads the other's submissions; its
    students are its own; each course page counts its own submissions and diagnostics."""
    app, _ = two_courses
    prof_a, _ = client_of(app, "profa")
    prof_b, _ = client_of(app, "profb")
    a, b = grades_of(prof_a, "pytorch"), grades_of(prof_b, "mpi")
    q_a, q_b = a["username"].index("autograd-q"), b["username"].index("autograd-q")
    assert set(a) == {"username", "", "both", "stua"} and set(b) == {"username", "", "both", "stub"}
    assert (a["both"][q_a], a["stua"][q_a], b["both"][q_b], b["stub"][q_b]) == ("4", "6", "9", "8")
    assert "halo-exchange" in b["username"] and "halo-exchange" not in a["username"]
    page = prof_a.get("/courses/pytorch/staff/").text
    assert "2 students" in page
    row = re.search(r'exercises/autograd-q">.*?</tr>', page, re.S).group(0)
    # students who submitted, submissions, mean best; the diagnostic's students
    assert " ".join(re.sub(r"<[^>]+>", " ", row).split()).count("2 / 2 2 5 / ") == 1
    assert "2 students" in row
    zipped = prof_b.get("/courses/mpi/staff/exercises/autograd-q/submissions.zip")
    assert zipped.status_code == 200 and b"both.py" in zipped.data and b"stua.py" not in zipped.data


def test_a_zip_dates_its_files_in_the_courses_time_zone(two_courses):
    app, _ = two_courses
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        session.scalar(select(Course).where(Course.slug == "mpi")).timezone = "Asia/Tokyo"
    prof_b, _ = client_of(app, "profb")
    zipped = prof_b.get("/courses/mpi/staff/exercises/autograd-q/submissions.zip").data
    # sent at 17:00 UTC on 23 November: 02:00 the next day in Tokyo
    assert zipfile.ZipFile(io.BytesIO(zipped)).getinfo("stub.py").date_time[2:4] == (24, 2)


def test_a_regrade_previews_only_its_courses_students(two_courses):
    """ "Grade all again" in B grades B's students' submissions: not both's in A, nor staff's."""
    app, ids = two_courses
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        q_b = session.scalar(
            select(Exercise).join(Course).where(Course.slug == "mpi", Exercise.slug == "autograd-q")
        )
        profb = session.scalar(select(User).where(User.username == "profb"))
        submit(session, profb, q_b, 3)  # trying it out
        session.get(Regrade, ids["regrade-mpi"]).discarded_at = utcnow()
        regrade = start(session, q_b, profb, utcnow())
        session.flush()
        previewed = session.scalars(
            select(GradingRun.submission_id).where(GradingRun.regrade_id == regrade.id)
        ).all()
        assert sorted(previewed) == sorted([ids["both-b"], ids["stub"]])
        session.rollback()
