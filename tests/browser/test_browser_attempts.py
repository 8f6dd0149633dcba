"""Issue 23, a student's history of an exercise, in a real browser (Debian's Chromium) through
nginx on the whole service: from the exercise page to the attempts, the one that counts said in
words, the checks that changed between the two and the code's lines added and removed, each
marked by a sign and a hidden word besides its colour; two attempts chosen in the form; the
staff's view of a student's history from the student's page. At 1366 px and 390 px, in
English and Spanish, axe clean; any console error or CSP violation fails the test
(conftest.open_page)."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot
from stack import EXERCISES, settle

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "autograd-no-track"  # no other browser test submits to it
STUDENT = "s02"
SENT = [
    EXERCISES / EXERCISE / "mutants" / "grad_not_cleared.py",
    EXERCISES / EXERCISE / "reference.py",
]
ATTEMPTS = f"/courses/pytorch/exercises/{EXERCISE}/attempts"


@pytest.fixture(scope="module")
def sent(site) -> list[int]:
    """The student's two submissions, graded: a known mistake, then the reference."""
    api = site.stack.api(STUDENT)
    ids = []
    for path in SENT:  # one after the other: the second is the newer
        ids.append(api.submit(EXERCISE, path.read_text()).json()["id"])
        found = settle(site.stack, ids, 180)
        assert found[ids[-1]].status == "graded", site.stack.logs()
    return ids


@ON_A_DESKTOP_AND_A_PHONE
def test_a_student_sees_which_attempt_counts_and_what_changed(site, open_page, sent, kind, lang):
    page = open_page(kind)
    log_in(page, site, STUDENT)
    page.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    with page.expect_navigation():
        page.locator(f"main a[href='{ATTEMPTS}']").click()
    assert page.locator("html").get_attribute("lang") == lang
    rows = page.locator("table.attempts tbody tr")
    assert rows.count() == 2
    assert page.locator("table.attempts tr.counted").count() == 1
    assert page.locator("table.attempts tr.counted .col-id").inner_text() == f"#{sent[1]}"
    # the latest two compared: the checks that changed, the code's lines removed and added
    assert page.locator("table.check-changes tbody tr").count() >= 1
    assert page.locator("table.code-diff tr.added").count() >= 1
    assert page.locator("table.code-diff tr.removed").count() >= 1
    if lang == "en":
        assert "failed → passed" in page.locator("table.check-changes").inner_text()
        assert (
            page.locator("table.code-diff tr.added .visually-hidden").first.inner_text() == "added"
        )
        assert "Counts: the best score" in page.locator("table.attempts tr.counted").inner_text()
    assert layout_problems(page) == {}
    if lang == "en":
        screenshot(page, "attempts" if kind == "desktop" else "attempts-phone")


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_staff_open_a_students_history_and_choose_two_attempts(site, open_page, sent, kind):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"/courses/pytorch/staff/students/{STUDENT}"))
    staff_attempts = f"/courses/pytorch/staff/students/{STUDENT}/attempts/{EXERCISE}"
    with page.expect_navigation():
        page.locator(f"main a[href='{staff_attempts}']").click()
    # the same attempt on both sides: nothing to compare, and said so
    page.locator("select[name=old]").select_option(str(sent[1]))
    page.locator("select[name=new]").select_option(str(sent[1]))
    with page.expect_navigation():
        page.locator(".compare-form button").click()
    assert page.locator("table.code-diff").count() == 0
    assert "Choose two different attempts." in page.locator("#changes").inner_text()
    page.locator("select[name=old]").select_option(str(sent[0]))
    with page.expect_navigation():
        page.locator(".compare-form button").click()
    assert f"old={sent[0]}&new={sent[1]}" in page.url
    assert page.locator("table.code-diff tr.added").count() >= 1
    assert layout_problems(page) == {}
    if kind == "desktop":
        screenshot(page, "staff-attempts")
