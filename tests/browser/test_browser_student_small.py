"""The student's pages in small things, in a real browser: a phone's header takes at most about
100 of its 844 px on every student page, and a diagnostic's hint is as dark as the scores
beside it; at both widths and in both languages."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, log_in
from stack import EXERCISES, settle

pytestmark = [pytest.mark.browser, pytest.mark.services]

STUDENT = "s01"
NONSCALAR = EXERCISES / "autograd-q" / "mutants" / "backward_without_gradient.py"
PAGES = (
    "/",
    "/courses/pytorch/",
    "/courses/pytorch/exercises/autograd-q",
    "/courses/pytorch/submissions",
    "/account",
)


@pytest.fixture(scope="module")
def graded_wrong(site) -> int:
    """A wrong submission of STUDENT's, graded: its diagnostics carry hints."""
    answer = site.stack.api(STUDENT).submit("autograd-q", NONSCALAR.read_text())
    submission_id = answer.json()["id"]
    found = settle(site.stack, [submission_id], 120)
    assert found[submission_id].status == "graded", site.stack.logs()
    return submission_id


@ON_A_DESKTOP_AND_A_PHONE
def test_the_header_is_short_and_the_hint_as_dark_as_the_scores(
    site, open_page, kind, lang, graded_wrong
):
    page = open_page(kind)
    log_in(page, site, STUDENT)
    for path in (*PAGES, f"/courses/pytorch/submissions/{graded_wrong}"):
        page.goto(site.url(path))
        height = page.locator("header.bar").bounding_box()["height"]
        assert height <= (100 if kind == "phone" else 80), (path, height)
    hint = page.locator(".diagnostic p.hint").first
    score = page.locator("strong.score").first
    colour = "e => getComputedStyle(e).color"
    assert hint.evaluate(colour) == score.evaluate(colour) == "rgb(29, 36, 48)"  # --ink
