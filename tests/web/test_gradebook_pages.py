"""The gradebook of a 200-student course: a page of 50 students at a time, the pages' links
keeping the search, sort and filter, a search or filter over every student (not one page); the
percentages to one decimal, as the CSV has them ("1.8 %", not "2 %")."""

import csv
import io
import re

import pytest
from course_data import submit
from helpers import logged_in, the_course
from sqlalchemy import select
from test_gradebook import body_rows, only

from server.core.models import Exercise, User
from server.core.users import add_user

STUDENTS = 200
GRADES = "/courses/pytorch/staff/grades"


@pytest.fixture
def big_course(course):
    """ana, bea and 200 more students (st000…st199, added as the roster import adds accounts
    waiting for their owners' passwords), prof an instructor; only autograd-q and metrics
    active (20 points): st007 has 0.36 of them (1.8 %), st150 full marks on autograd-q."""
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        pytorch = the_course(session)
        add_user(
            session, "prof", "Pilar", "p@uni.es", "instructor", "long-password", course=pytorch
        )
        for n in range(STUDENTS):
            add_user(
                session,
                f"st{n:03d}",
                f"Student {n:03d}",
                f"st{n:03d}@uni.es",
                "student",
                None,
                course=pytorch,
            )
        users = {u.username: u for u in session.scalars(select(User))}
        q = session.scalar(
            select(Exercise).where(Exercise.course_id == pytorch.id, Exercise.slug == "autograd-q")
        )
        submit(session, users["st007"], q, 0.36)
        submit(session, users["st150"], q, 10)
    only(course, "autograd-q", "metrics")
    client, _ = logged_in(course, "prof")
    return client


def shown(client, query: str = "", lang: str | None = None) -> tuple[str, dict[str, list[str]]]:
    """The page (in `lang` where asked) and its rows by username."""
    asked = "&".join(part for part in (query, lang and f"lang={lang}") if part)
    page = client.get(f"{GRADES}?{asked}" if asked else GRADES).text
    return page, body_rows(page)


def page_links(page: str) -> list[str]:
    nav = re.search(r'<nav class="pages".*?</nav>', page, re.S).group(0)
    return [link.replace("&amp;", "&") for link in re.findall(r'href="([^"]+)"', nav)]


def test_two_hundred_students_come_fifty_to_a_page(big_course):
    page, rows = shown(big_course)
    assert len(rows) == 50
    # by family name: "Student 000" is a given name and the family name "000", before "García"
    assert list(rows)[:3] == ["st000", "st001", "st002"]
    assert "202 students" in page and "Rows 1–50, page 1 of 5" in page
    assert page_links(page)[-1] == f"{GRADES}?page=2"  # Next
    page, rows = shown(big_course, "page=5")
    assert list(rows) == ["ana", "bea"]  # García and Martín, after the 200 "000"…"199"
    assert "Rows 201–202, page 5 of 5" in page
    # a page past the end, or not a number, is the nearest there is
    assert list(shown(big_course, "page=99")[1]) == list(rows)
    assert list(shown(big_course, "page=two")[1])[:1] == ["st000"]


def test_pages_keep_the_sort_and_the_search_spans_every_student(big_course):
    page, rows = shown(big_course, "sort=total&order=desc")
    assert list(rows)[:2] == ["st150", "st007"]  # the best on the first page
    assert f"{GRADES}?sort=total&order=desc&page=2" in page_links(page)
    page, rows = shown(big_course, "sort=total&order=desc&page=2")
    assert "st150" not in rows and len(rows) == 50
    # one student found among all 200, on the first page
    page, rows = shown(big_course, "q=st187")
    assert list(rows) == ["st187"] and '<nav class="pages"' not in page
    assert "1 of 202 students" in page


def test_percentages_have_the_csvs_precision(big_course):
    plain = list(csv.reader(io.StringIO(big_course.get(f"{GRADES}.csv").text)))
    assert {row[0]: row[-1] for row in plain[2:]}["st007"] == "1.8"
    assert shown(big_course, "q=st007")[1]["st007"][-1] == "1.8%"
    assert shown(big_course, "q=st007", "es")[1]["st007"][-1] == "1,8 %"
    assert shown(big_course, "q=st150", "en")[1]["st150"][-1] == "50.0%"
