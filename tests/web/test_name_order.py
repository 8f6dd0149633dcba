"""Every list of a course's students sorts by family name, then given name, accents and case
aside, as a Spanish class list does: the gradebook and its CSV, the exercise's students, the
roster, the students to give an exception to, the accounts waiting for a password."""

import csv
import io
import re

import pytest
from helpers import logged_in

from server.core.users import add_user

STAFF = "/courses/pytorch/staff"
# by username: aaron, ana, bea, yago, zoe
BY_FAMILY_NAME = ["yago", "zoe", "ana", "bea", "aaron"]


@pytest.fixture
def named(course):
    """ana (García) and bea (Martín), and three more whose usernames sort otherwise: Álvarez
    beside Alvarez (by the given name), Zubiri last."""
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "aaron", "Aarón Zubiri", "aa@uni.es", "student", None)
        add_user(
            session, "zoe", "", "z@uni.es", "student", None, given_name="Zoe", family_name="Álvarez"
        )
        add_user(session, "yago", "Yago ALVAREZ", "y@uni.es", "student", None)
        session.commit()
    return course


def in_order(page: str, usernames: list[str]) -> list[str]:
    """The usernames as they first appear on the page."""
    found = {name: page.find(f">{name}<") for name in usernames}
    assert all(at >= 0 for at in found.values()), found
    return sorted(usernames, key=found.get)


def test_every_list_of_students_sorts_by_family_name(named):
    client, _token = logged_in(named, "prof")
    for path in (
        f"{STAFF}/grades",
        f"{STAFF}/exercises/autograd-q",
        f"{STAFF}/roster/",
    ):
        assert in_order(client.get(path).text, BY_FAMILY_NAME) == BY_FAMILY_NAME, path
    bulk = client.get(f"{STAFF}/exceptions?exercise=autograd-q").text
    ticked = re.findall(r'name="student" value="([\w.-]+)"', bulk)
    assert ticked == BY_FAMILY_NAME
    rows = list(csv.reader(io.StringIO(client.get(f"{STAFF}/grades.csv").text)))
    assert [row[0] for row in rows[2:]] == BY_FAMILY_NAME
    by_name_desc = client.get(f"{STAFF}/grades?order=desc").text
    assert in_order(by_name_desc, BY_FAMILY_NAME) == BY_FAMILY_NAME[::-1]
    waiting = client.get(f"{STAFF}/roster/waiting").text  # aaron, yago and zoe have none yet
    assert re.findall(r"<tr><td>([\w.-]+)</td>", waiting) == ["yago", "zoe", "aaron"]
