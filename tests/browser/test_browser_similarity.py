"""Code similarity in a real browser (Debian's Chromium) through nginx on the whole service: from
the exercise's staff page to the pairs, "Compare" sent through the queue to the Celery worker and
its pairs shown (the copy with its names changed first), the warning that it is no grade, and
one pair side by side with the shared code marked, the two files beside each other on a wide
screen and one under the other on a phone; a student is refused. At 1366 px and 390 px, in
English and Spanish, axe clean; any console error or CSP violation fails the test
(conftest.open_page)."""

from __future__ import annotations

import json
import time

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot
from similar_programs import APART, REFERENCE, RENAMED
from stack import settle

pytestmark = [pytest.mark.browser, pytest.mark.services]

# an exercise no other browser test submits to
EXERCISE = "autograd-saved-hooks"
PAGE = f"/courses/pytorch/staff/exercises/{EXERCISE}/similarity"
NOTEBOOK = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "source": APART[1]}]}
SENT = {
    "s00": ("work.py", REFERENCE),
    "s01": ("work.py", RENAMED),
    "s02": ("work.py", APART[0]),
    "s03": ("work.ipynb", json.dumps(NOTEBOOK)),
}
WARNING = {"en": "never a grade", "es": "nunca una nota"}


@pytest.fixture(scope="module")
def sent(site) -> dict[str, int]:
    """Each student's one submission, graded (username → its id)."""
    ids = {
        name: site.stack.api(name).submit(EXERCISE, code, filename=filename).json()["id"]
        for name, (filename, code) in SENT.items()
    }
    found = settle(site.stack, list(ids.values()), 180)
    assert [s.status for s in found.values()] == ["graded"] * len(ids), site.stack.logs()
    return ids


def compared(page, seconds: float = 60) -> None:
    """Wait, reloading as the page asks, until the comparison asked for is made."""
    deadline = time.monotonic() + seconds
    while page.locator("#comparison .tag.running").count():
        assert time.monotonic() < deadline, "the comparison was not made in time"
        time.sleep(1)
        page.reload()


@ON_A_DESKTOP_AND_A_PHONE
def test_the_pairs_then_one_pair_side_by_side(site, open_page, sent, kind, lang):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}"))
    with page.expect_navigation():
        page.locator(f"a[href$='{PAGE}']").click()
    assert WARNING[lang] in page.locator("#lead-only").inner_text()
    with page.expect_navigation():
        page.locator("#comparison button[type=submit]").click()
    assert page.locator("[role=alert], .flash").count() >= 1
    compared(page)
    rows = page.locator("table.similarity-pairs tbody tr")
    assert rows.count() >= 1
    first = rows.first.inner_text()
    assert "s00" in first and "s01" in first  # the copy with its names changed, first
    assert layout_problems(page) == {}
    if lang == "en":
        screenshot(page, "staff-similarity" if kind == "desktop" else "staff-similarity-phone")

    with page.expect_navigation():
        rows.first.locator("a[href*='/similarity/']").click()
    assert WARNING[lang] in page.locator(".lead-only").inner_text()
    assert page.locator("mark.alike").count() >= 2
    left, right = (
        box.bounding_box() for box in page.locator(".side-by-side-columns > section").all()
    )
    if kind == "desktop":
        assert left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 2
    else:
        assert right["y"] >= left["y"] + left["height"]
    assert layout_problems(page) == {}
    if lang == "en" and kind == "desktop":
        screenshot(page, "staff-similarity-pair")


def test_a_student_is_refused(site, open_page, sent):
    page = open_page("desktop")
    log_in(page, site, "s02")
    answer = page.goto(site.url(PAGE))
    assert answer.status == 403
