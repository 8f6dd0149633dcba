"""The instructors' pages: overview, one exercise, one student, gradebook and CSV, regrading."""
import csv
import datetime as dt
import io
import re
from pathlib import Path

import pytest
from sqlalchemy import select

from helpers import REFERENCE_Q
from server.models import Exercise, Submission, User
from server.submissions import Rules, accept
from server.users import add_user
from worker.grading import grade

LEASE = dt.timedelta(minutes=5)
SIGN_FLIPPED = (Path(__file__).parents[1] / "exercises" / "autograd-q" / "mutants"
                / "plus_b_squared.py").read_text()


def logged_in(app, username, password="long-password"):
    client = app.test_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    assert client.post("/login", data={"username": username, "password": password,
                                       "csrf_token": token}).status_code == 302
    return client, re.search(r'name="csrf_token" value="([^"]+)"', client.get("/").text).group(1)


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
        submissions = [accept(session, users[name], exercise, "work.py", code.encode(),
                              Rules(1024, 100, 60), dt.datetime.now(dt.timezone.utc))
                       for name, code in [("ana", REFERENCE_Q), ("bea", SIGN_FLIPPED),
                                          ("bea", REFERENCE_Q), ("prof", SIGN_FLIPPED)]]
        session.commit()
        ids = [submission.id for submission in submissions]
        session.close()
        for submission_id in ids:
            assert grade(database, executor, catalogue, submission_id, worker="t", lease=LEASE) == "graded"
    return course, ids


def test_only_staff_get_in(graded_course):
    app, ids = graded_course
    student, token = logged_in(app, "ana")
    for path in ("/staff/", "/staff/grades", "/staff/grades.csv", "/staff/exercises/autograd-q",
                 "/staff/students/bea"):
        assert student.get(path).status_code == 403
    assert student.post(f"/staff/submissions/{ids[0]}/regrade",
                        data={"csrf_token": token}).status_code == 403
    assert "Course" not in student.get("/").text
    assert app.test_client().get("/staff/").headers["Location"].startswith("/login")


def test_the_course_at_a_glance(graded_course):
    app, _ = graded_course
    client, _ = logged_in(app, "prof")
    overview = client.get("/staff/").text
    row = re.search(r"Gradients of a non-scalar function.*?</tr>", overview, re.S).group(0)
    cells = re.findall(r"<td>(.*?)</td>", row, re.S)
    assert cells[:4] == ["2 / 3", "3", "10.00", "2"]  # students, submissions, mean best, full marks
    assert "grad-sign-flipped" in cells[4]
    page = client.get("/staff/exercises/autograd-q").text
    assert re.search(r"grad-sign-flipped</code></td><td>1</td><td>1</td>", page)
    assert "Carl" in page and "nothing submitted" in page
    assert client.get("/staff/exercises/no-such-thing").status_code == 404
    assert "Curso" in client.get("/staff/?lang=es").text


def test_gradebook_and_csv(graded_course):
    app, ids = graded_course
    client, _ = logged_in(app, "prof")
    rows = list(csv.reader(io.StringIO(client.get("/staff/grades.csv").text)))
    header = rows[0]
    assert header[:3] == ["username", "name", "email"] and "autograd-q" in header
    column = header.index("autograd-q")
    grades = {row[0]: row[column] for row in rows[1:]}
    assert grades == {"ana": "10", "bea": "10", "carl": ""}
    assert len(header) == 3 + 6  # every exercise has its column, even one nobody submitted
    assert all(cell == "" for row in rows[1:] for i, cell in enumerate(row[3:], 3) if i != column)
    grid = client.get("/staff/grades").text
    assert f'/submissions/{ids[2]}">10<' in grid


def test_staff_see_any_submission_with_its_code_and_runs(graded_course):
    app, ids = graded_course
    client, _ = logged_in(app, "prof")
    page = client.get(f"/submissions/{ids[1]}").text
    assert "Bea" in page and "3 * a**3 + b**2" in page and "Grading runs" in page
    assert "grad-sign-flipped" in page
    student, _ = logged_in(app, "ana")
    own = student.get(f"/submissions/{ids[0]}").text
    assert "The code submitted" in own and "Grading runs" not in own
    assert client.get("/staff/students/bea").text.count("/submissions/") >= 2
    assert client.get("/staff/students/nobody").status_code == 404


def test_regrade_queues_again_and_grades_once_more(graded_course, executor, catalogue):
    app, ids = graded_course
    client, token = logged_in(app, "prof")
    assert client.post(f"/staff/submissions/{ids[1]}/regrade").status_code == 400  # no CSRF token
    api = app.test_client()
    bearer = {"Authorization": "Bearer " + api.post("/api/v1/tokens", json={
        "username": "bea", "password": "long-password"}).json["token"]}
    assert api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json["status"] == "graded"
    sent = client.post(f"/staff/submissions/{ids[1]}/regrade", data={"csrf_token": token})
    assert sent.status_code == 303
    # the graded result the API served before is not served again from its cache
    assert api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json["status"] == "queued"
    # requests made inside an app context would share its session, and rolling that back at the
    # end would undo the grading below: this test makes each request on its own
    database = app.extensions["hpcgrade.db"]
    with database.sessions() as session:
        assert session.get(Submission, ids[1]).status == "queued"
    again = client.post(f"/staff/submissions/{ids[1]}/regrade", data={"csrf_token": token})
    assert "already waiting" in client.get(again.headers["Location"]).text
    assert grade(database, executor, catalogue, ids[1], worker="t", lease=LEASE) == "graded"
    with database.sessions() as session:
        submission = session.get(Submission, ids[1])
        assert submission.status == "graded" and len(submission.runs) == 2
        assert submission.score < submission.max_score
    result = api.get(f"/api/v1/submissions/{ids[1]}", headers=bearer).json
    assert result["status"] == "graded" and result["checks"]


def test_check_titles_in_the_students_language(graded_course):
    app, ids = graded_course
    api = app.test_client()
    bearer = {"Authorization": "Bearer " + api.post("/api/v1/tokens", json={
        "username": "bea", "password": "long-password"}).json["token"]}
    titles = {lang: [c["title"] for c in api.get(f"/api/v1/submissions/{ids[1]}?lang={lang}",
                                                 headers=bearer).json["checks"]]
              for lang in ("en", "es")}
    assert "2-D inputs" in titles["en"] and "entradas 2-D" in titles["es"]
