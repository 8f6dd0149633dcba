"""The student's pages, in small things: the points to earn on the exercise list before any
submission, "Submit again" landing at the form, a refused log-in keeping the username, and "My
courses" with the newest edition first and links that tell editions apart, and every time a
course's pages show in its time zone, named."""

import datetime as dt
import html
import re
from zoneinfo import ZoneInfo

import pytest
from helpers import REFERENCE_Q, log_in, logged_in, new_course
from sqlalchemy import select

from server.core.courses import enrol
from server.core.models import Course, Submission, User

pytestmark = pytest.mark.postgresql_only


def text_of(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]*>", " ", page)).split())


def test_the_exercise_list_shows_the_points_to_earn_before_any_submission(course):
    client, _token = logged_in(course)
    listed = text_of(client.get("/courses/pytorch/").text)
    assert "10 points to earn" in listed and "—" not in listed.split("Attempts left", 1)[1]
    spanish = text_of(client.get("/courses/pytorch/?lang=es").text)
    assert "10 puntos en juego" in spanish


def test_submit_again_lands_at_the_form(course):
    client, token = logged_in(course)
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    with course.app_context(), course.extensions["hpcgrade.db"].sessions.begin() as session:
        session.scalar(select(Submission)).status = "graded"  # no broker here: it stays queued
    page = client.get(sent.headers["Location"]).text
    assert '<a href="/courses/pytorch/exercises/autograd-q#submit">Submit again</a>' in page
    assert 'id="submit"' in client.get("/courses/pytorch/exercises/autograd-q").text


def test_a_wrong_password_keeps_the_username(course):
    client = course.test_client()
    refused = log_in(client, "ana", "not-her-password")
    assert refused.status_code == 401 and "Wrong username or password." in refused.text
    assert re.search(r'<input name="username"[^>]* value="ana"', refused.text)
    assert re.search(r'<input name="password"[^>]* autofocus', refused.text)
    assert 'value="not-her-password"' not in refused.text


def test_my_courses_lists_the_newest_edition_first_with_links_telling_them_apart(course):
    database = course.extensions["hpcgrade.db"]
    with database.sessions.begin() as session:
        ana = session.scalar(select(User).where(User.username == "ana"))
        pytorch = session.scalar(select(Course).where(Course.slug == "pytorch"))
        pytorch.edition = "2026"
        # the older edition made after the newer one (a copy for the resits)
        older = new_course(session, "pytorch-2025", edition="2025 (resits)")
        older.created_at = pytorch.created_at + dt.timedelta(days=1)
        enrol(session, ana, older, "student")
    client, _token = logged_in(course)
    page = client.get("/").text
    links = re.findall(r'<li><a href="/courses/([^/]+)/">([^<]+)</a>', page)
    assert links == [
        ("pytorch", "Tensors and autograd · 2026"),
        ("pytorch-2025", "Tensors and autograd · 2025 (resits)"),
    ]


def test_every_time_a_course_shows_is_in_its_zone_with_the_zones_name(course):
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        session.scalar(select(Course).where(Course.slug == "pytorch")).timezone = "Asia/Tokyo"
    client, token = logged_in(course)
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    with course.extensions["hpcgrade.db"].sessions() as session:
        at = session.scalar(select(Submission.submitted_at))
    shown = at.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%-d %b %Y, %H:%M JST")
    for path in (
        sent.headers["Location"],
        "/courses/pytorch/submissions",
        "/courses/pytorch/exercises/autograd-q",
    ):
        assert shown in text_of(client.get(path).text), path
