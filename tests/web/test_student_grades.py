"""The staff's page of one student: their grade on each exercise as the gradebook counts it
(late penalty, grade set by hand, an exception of their own marked), their total, and "Set the
grade" beside each exercise, which opens the form that sets it."""

import hashlib
import html
import re

import pytest
from helpers import logged_in
from sqlalchemy import select

from server.core.models import Allowance, Exercise, SetGrade, Submission, User
from server.core.users import add_user
from server.web.course import gradebook

PAGE = "/courses/pytorch/staff/students/ana"


def text_of(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


@pytest.fixture
def marked(course):
    """ana: autograd-q 8 / 10 sent a day late (−25%: 6), a grade of 3 set by hand on
    autograd-accumulation, an exception on another exercise; prof teaches."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        ana = session.scalar(select(User).where(User.username == "ana"))
        by_slug = {e.slug: e for e in session.scalars(select(Exercise))}
        session.add(
            Submission(
                user_id=ana.id,
                exercise_id=by_slug["autograd-q"].id,
                filename="work.py",
                code=b"x = 1\n",
                sha256=hashlib.sha256(b"x").hexdigest(),
                status="graded",
                score=6.0,
                max_score=10.0,
                late_days=1,
                penalty=0.25,
            )
        )
        session.add(
            SetGrade(
                user_id=ana.id,
                exercise_id=by_slug["autograd-accumulation"].id,
                score=3.0,
                comment="Agreed in the lab.",
            )
        )
        others = sorted(
            slug for slug in by_slug if slug not in ("autograd-q", "autograd-accumulation")
        )
        session.add(Allowance(user_id=ana.id, exercise_id=by_slug[others[0]].id, extra_attempts=2))
        session.commit()
        session.close()
    return course, others[0]


def rows_of(page: str) -> dict[str, str]:
    table = re.search(r"<section[^>]*student-grades.*?</section>", page, re.S).group(0)
    found = {}
    for row in re.findall(r"<tr>.*?</tr>|<tr class=\"grades-total\">.*?</tr>", table, re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        if len(cells) >= 2 and 'scope="col"' not in row:
            found[text_of(cells[0])] = text_of(cells[1])
    return found


@pytest.mark.parametrize("lang", ["en", "es"])
def test_the_students_page_shows_each_grade_and_the_total(marked, lang):
    app, excepted = marked
    prof, _token = logged_in(app, "prof", lang=lang)
    page = prof.get(PAGE).text
    rows = rows_of(page)
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        columns, everyone = gradebook(session, session.scalar(select(Exercise.course_id)))
        (ana,) = [row for row in everyone if row.student.username == "ana"]
        titles = {
            c.exercise.slug: c.exercise.title_es if lang == "es" else c.exercise.title_en
            for c in columns
        }
        session.close()
    assert len(rows) == len(columns) + 1  # an exercise a row, and the total
    late = "con retraso" if lang == "es" else "late"
    assert (
        rows[titles["autograd-q"]].startswith("6 / 10")
        and f"{late}: −25" in rows[titles["autograd-q"]]
    )
    assert rows[titles["autograd-accumulation"]].startswith("3 /")
    assert "✎" in page.split(titles["autograd-accumulation"])[1].split("</tr>")[0]
    exception = "con una excepción" if lang == "es" else "with an exception"
    assert exception in rows[titles[excepted]]
    assert rows[titles[excepted]].startswith("—")
    (total_label,) = [label for label in rows if label in ("Total",)]
    assert rows[total_label].startswith(f"9 / {ana.out_of:g}") and ana.total == 9


def test_set_the_grade_is_beside_each_exercise_and_opens_its_form(marked):
    app, _excepted = marked
    prof, token = logged_in(app, "prof")
    page = prof.get(PAGE).text
    links = re.findall(r'<a href="([^"]+)">Set the grade</a>', page)
    assert len(links) == len(rows_of(page)) - 1
    link = html.unescape(next(link for link in links if "/exercises/autograd-q?" in link))
    form = prof.get(link).text
    assert re.search(r'<details id="set-grade" open>', form)
    assert 'action="/courses/pytorch/staff/students/ana/exercises/autograd-q/grade"' in form
    # the form sets it, and the student's page says so
    assert (
        prof.post(
            link.split("?")[0] + "/grade",
            data={"csrf_token": token, "score": "9", "comment": "Agreed."},
        ).status_code
        == 303
    )
    assert rows_of(prof.get(PAGE).text)["Gradients of a non-scalar function"].startswith("9 / 10")
