"""Log-in through the centre's provider in a real browser: a student, enrolled by the provider's
groups claim, goes from hpcgrade's log-in page to the provider's form (scripts/oidc's
oidc-provider) and lands on their course, at desktop and at phone width."""

from __future__ import annotations

import oidc_provider
import pytest
from browser import overflows
from sqlalchemy import select
from stack import COURSES

pytestmark = [pytest.mark.browser, pytest.mark.services]

COURSE = COURSES[0]


@pytest.fixture(scope="module")
def course_of_groups(site):
    """The first course enrols the provider's pytorch-students (stack.Stack gave the service
    the provider's settings)."""
    oidc_provider.require()
    from server.core.models import Course

    database = site.database()
    try:
        with database.sessions.begin() as session:
            session.scalar(select(Course).where(Course.slug == COURSE)).directory_groups = {
                "student": ["pytorch-students"]
            }
    finally:
        database.dispose()
    return site


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_a_student_logs_in_at_the_provider_and_lands_on_their_course(
    course_of_groups, open_page, kind
):
    site, page = course_of_groups, open_page(kind)
    person = oidc_provider.new_person(groups=["pytorch-students"])
    page.goto(site.url(f"/courses/{COURSE}/"))  # to the log-in page, which comes back here
    assert overflows(page) == []
    page.get_by_role("link", name="Log in with University account").click()
    page.wait_for_url(f"{oidc_provider.ISSUER}/interaction/**")
    page.get_by_label("Username").fill(person["login"])
    page.get_by_label("Password").fill(person["password"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(site.url(f"/courses/{COURSE}/"))
    assert "Tensors and autograd" in page.locator("header").text_content()
    assert person["claims"]["name"] in page.locator("header").text_content()
    assert overflows(page) == []
