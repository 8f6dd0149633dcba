"""Issue 23, grading by hand, in a real browser (Debian's Chromium) through nginx on the whole
service: from a submission's page or the exercise's to the hand-grading page, the code beside
the checks on a wide screen and under them on a phone, the keys n/j and p/k that move between
the students' counted submissions (and do nothing while typing), a saved comment picked into the
score's comment, and "Save and go to the next". At 1366 px and 390 px, in English and Spanish, axe
clean; any console error or CSP violation fails the test (conftest.open_page)."""

from __future__ import annotations

import re

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot
from sqlalchemy import select
from stack import EXERCISES, settle

from server.core.models import Course, Exercise, SavedComment

pytestmark = [pytest.mark.browser, pytest.mark.services]

# an exercise no other browser test submits to: the order below is these three students'
EXERCISE = "autograd-vjp"
SENT = {
    "s00": EXERCISES / EXERCISE / "reference.py",
    "s01": EXERCISES / EXERCISE / "mutants" / "vjp_ones_cotangent.py",
    "s02": EXERCISES / EXERCISE / "mutants" / "vjp_formula_by_hand.py",
}
SAVED = "The cotangent is `v`, not ones."


def hand_grading(submission_id: int) -> str:
    return f"/courses/pytorch/staff/submissions/{submission_id}/hand-grading"


@pytest.fixture(scope="module")
def graded(site) -> dict[str, int]:
    """Each student's submission, graded (username → its id), and a comment saved for the
    exercise."""
    ids = {
        name: site.stack.api(name).submit(EXERCISE, path.read_text()).json()["id"]
        for name, path in SENT.items()
    }
    found = settle(site.stack, list(ids.values()), 180)
    assert [s.status for s in found.values()] == ["graded"] * len(ids), site.stack.logs()
    database = site.database()
    try:
        with database.sessions.begin() as session:
            exercise = session.scalar(
                select(Exercise)
                .join(Course)
                .where(Exercise.slug == EXERCISE, Course.slug == "pytorch")
            )
            if not session.scalar(select(SavedComment).where(SavedComment.text == SAVED)):
                session.add(
                    SavedComment(course_id=exercise.course_id, exercise_id=exercise.id, text=SAVED)
                )
    finally:
        database.dispose()
    return ids


@ON_A_DESKTOP_AND_A_PHONE
def test_the_code_beside_the_checks_on_a_wide_screen_and_under_them_on_a_phone(
    site, open_page, graded, kind, lang
):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"/courses/pytorch/submissions/{graded['s01']}"))
    page.locator("#adjust-score summary").click()
    with page.expect_navigation():
        page.locator(f"a[href$='{hand_grading(graded['s01'])}']").click()
    assert page.locator("#hand-grading").count() == 1
    assert (
        page.locator("#previous-submission")
        .get_attribute("href")
        .startswith(hand_grading(graded["s00"]))
    )
    assert (
        page.locator("#next-submission")
        .get_attribute("href")
        .startswith(hand_grading(graded["s02"]))
    )
    assert page.locator("kbd").count() >= 5  # the keys are written on the page
    assert page.locator("button.use-comment:visible").count() >= 1  # shown by the script
    code = page.locator(".hand-grading-code").bounding_box()
    results = page.locator(".hand-grading-results").bounding_box()
    if kind == "desktop":
        assert code["x"] + code["width"] <= results["x"] and abs(code["y"] - results["y"]) < 2
    else:
        assert results["y"] >= code["y"] + code["height"]
    assert layout_problems(page) == {}
    if lang == "en":
        screenshot(page, "staff-hand-grading" if kind == "desktop" else "staff-hand-grading-phone")


@pytest.mark.parametrize("kind", ["desktop", "phone"])
def test_keys_move_between_students_and_a_saved_comment_goes_into_the_score(
    site, open_page, graded, kind
):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}"))
    with page.expect_navigation():  # the exercise's page starts at the first student by name
        page.locator(f"a[href$='/exercises/{EXERCISE}/hand-grading']").click()
    assert hand_grading(graded["s00"]) in page.url
    with page.expect_navigation():
        page.keyboard.press("j")
    assert re.search(hand_grading(graded["s01"]) + r"\?order=counted$", page.url)
    with page.expect_navigation():
        page.keyboard.press("p")
    assert hand_grading(graded["s00"]) in page.url
    with page.expect_navigation():
        page.keyboard.press("n")
    assert hand_grading(graded["s01"]) in page.url

    # "c" reaches the comment; n typed there is a letter, not a move; Esc leaves the field
    page.keyboard.press("c")
    assert page.evaluate("document.activeElement.id") == "override-comment"
    page.keyboard.type("nice try: ")
    assert hand_grading(graded["s01"]) in page.url
    page.locator("button.use-comment").first.click()
    assert page.locator("#override-comment").input_value() == "nice try:\n" + SAVED
    page.keyboard.press("s")  # in the field still: typed
    assert page.locator("#override-comment").input_value().endswith(SAVED + "s")
    page.keyboard.press("Escape")
    page.keyboard.press("s")
    assert page.evaluate("document.activeElement.name") == "score"
    page.keyboard.type("3")
    with page.expect_navigation():
        page.locator("#adjust-score button[value=next]").click()
    assert hand_grading(graded["s02"]) in page.url
    assert page.locator("[role=alert]").count() == 1
    page.goto(site.url(f"/courses/pytorch/submissions/{graded['s01']}"))
    assert "nice try:\nThe cotangent is v, not ones.s" in page.locator(".override").inner_text()
