"""Two courses in a real browser: a student of both picks one, submits there and finds each
course's work apart; an instructor of one lands in it and finds nothing of the other."""

from __future__ import annotations

import pytest
from browser import SUBMIT, live_states, log_in, walk
from stack import COURSES, EXERCISES

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "autograd-q"
REFERENCE = EXERCISES / EXERCISE / "reference.py"
FIRST, LAB = COURSES


def test_a_student_of_two_courses_picks_one_and_finds_each_apart(site, desktop):
    log_in(desktop, site, "s01")  # on both rosters (stack.Stack)
    assert desktop.url == site.url("/")
    courses = desktop.locator("main ul.courses a")
    assert sorted(courses.all_text_contents()) == ["Autograd lab", "Tensors and autograd"]
    courses.get_by_text("Autograd lab").click()
    desktop.wait_for_url(site.url(f"/courses/{LAB}/"))
    assert "Autograd lab" in desktop.locator("header").text_content()
    desktop.locator(f"main a[href='/courses/{LAB}/exercises/{EXERCISE}']").click()
    desktop.locator("textarea[name=code]").fill(REFERENCE.read_text())
    with desktop.expect_navigation():
        desktop.locator(f"form:has(textarea[name=code]) {SUBMIT}").click()
    assert desktop.url.startswith(site.url(f"/courses/{LAB}/submissions/"))
    lab_submission = desktop.url.rsplit("/", 1)[1]
    assert live_states(desktop)[-1].lower().startswith("graded")
    desktop.locator("header a", has_text="My submissions").click()
    assert desktop.locator(f"main a[href$='/submissions/{lab_submission}']").count() == 1
    desktop.locator("header a.course-name").click()  # back to her courses: the other one
    desktop.locator(f"main a[href='/courses/{FIRST}/']").click()
    desktop.locator("header a", has_text="My submissions").click()
    assert desktop.locator(f"main a[href$='/submissions/{lab_submission}']").count() == 0
    # her lab submission is found in the lab only
    assert desktop.goto(site.url(f"/courses/{FIRST}/submissions/{lab_submission}")).status == 404


def test_an_instructor_of_one_course_lands_in_it_and_the_other_does_not_exist(site, desktop):
    log_in(desktop, site, "prof")  # the instructor of the first course alone
    assert desktop.url == site.url(f"/courses/{FIRST}/staff/")
    answer = desktop.goto(site.url(f"/courses/{LAB}/staff/"))
    assert answer.status == 404
    answer = desktop.goto(site.url(f"/courses/{LAB}/staff/grades"))
    assert answer.status == 404


@pytest.mark.parametrize("lang", ["en", "es"])
def test_the_course_list_fits_a_phone_and_passes_axe(site, phone, lang):
    log_in(phone, site, "s02")
    assert walk(phone, site, {"courses": "/", "lab": f"/courses/{LAB}/"}, lang) == {}
