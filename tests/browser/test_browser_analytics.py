"""Issue 23, analytics by check and by named mistake, in a real browser (Debian's Chromium)
through nginx on the whole service, on submissions the grader really graded: the exercise's
pass rate of each check, its named mistakes in the exercise's own words with the number of
students who made them, the link from one to the submissions behind it (its section of the
diagnostic's page), and the course page's most frequent mistakes. At 1366 px and 390 px, in
English and Spanish, axe clean; any console error or CSP violation fails the test
(conftest.open_page)."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot
from stack import EXERCISES, settle

pytestmark = [pytest.mark.browser, pytest.mark.services]

# an exercise no other browser test submits to: its figures are these four submissions'
EXERCISE = "autograd-graph"
SENT = {
    "s00": EXERCISES / EXERCISE / "reference.py",
    "s01": EXERCISES / EXERCISE / "mutants" / "swapped_x1_x2.py",
    "s02": EXERCISES / EXERCISE / "mutants" / "intermediates_none.py",
    "s03": EXERCISES / EXERCISE / "mutants" / "swapped_x1_x2.py",
}
SWAPPED = {
    "en": "Your gradients of x1 and x2 are swapped",
    "es": "Tus gradientes de x1 y x2 están intercambiados",
}  # the exercise's own words
PAGE = f"/courses/pytorch/staff/exercises/{EXERCISE}"


@pytest.fixture(scope="module")
def graded(site) -> dict[str, int]:
    ids = {
        name: site.stack.api(name).submit(EXERCISE, path.read_text()).json()["id"]
        for name, path in SENT.items()
    }
    found = settle(site.stack, list(ids.values()), 180)
    assert [s.status for s in found.values()] == ["graded"] * len(ids), site.stack.logs()
    return ids


@ON_A_DESKTOP_AND_A_PHONE
def test_pass_rates_and_named_mistakes_lead_to_the_submissions_behind_them(
    site, open_page, graded, kind, lang
):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(PAGE))
    rates = page.locator("#checks tbody tr")
    assert rates.count() >= 2
    if lang == "en":  # every check ran on the four students' counted submissions
        assert all(
            " of 4 students passed" in said
            for said in rates.locator("td:nth-child(2) small").all_text_contents()
        )
    first = page.locator("#mistakes ol > li").first
    assert SWAPPED[lang] in first.locator(".mistake-words").text_content()
    assert first.locator(".mistake-words code").count() >= 2  # its Markdown, rendered
    if lang == "en":
        assert "2 students made this mistake" in first.text_content()
    assert layout_problems(page) == {}
    if lang == "en":
        page.locator("#checks").scroll_into_view_if_needed()
        screenshot(
            page,
            "staff-exercise-analytics" if kind == "desktop" else "staff-exercise-analytics-phone",
        )
    with page.expect_navigation():
        first.locator(".mistake-words a").click()
    assert page.url.endswith("#mistake-swapped_x1_x2")
    behind = page.locator("#mistake-swapped_x1_x2")
    assert behind.is_visible()
    names = behind.locator("tbody tr td:first-child small").all_text_contents()
    assert sorted(names) == ["s01", "s03"]
    assert layout_problems(page) == {}


@ON_A_DESKTOP_AND_A_PHONE
def test_the_course_page_names_the_most_frequent_mistakes(site, open_page, graded, kind, lang):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url("/courses/pytorch/staff/"))
    link = page.locator(
        f"td.mistakes a[href$='{PAGE}/diagnostics/grad-mismatch#mistake-swapped_x1_x2']"
    )
    assert link.count() == 1
    assert link.text_content().startswith(SWAPPED[lang]) and link.text_content().endswith("…")
    assert layout_problems(page) == {}
