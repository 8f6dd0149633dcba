"""A grade as an instructor and a student see it in a real browser (Debian's Chromium), through
nginx, on the whole service: partial credit on one submission that a better file sent later
overtakes; a grade set on the exercise that holds whatever is sent, said to the student with its
reason, then removed. The student reads it on a phone, the instructor on a desktop."""

from __future__ import annotations

import re

import pytest
from browser import layout_problems, log_in
from stack import EXERCISES, settle

from server.core.catalogue import max_points

pytestmark = [pytest.mark.browser, pytest.mark.services]

# an exercise and a student no other browser test sends anything to
EXERCISE = "autograd-accumulation"
STUDENT = "s02"
OUT_OF = max_points(EXERCISES / EXERCISE / "checks.py")
RIGHT = EXERCISES / EXERCISE / "reference.py"
WRONG = EXERCISES / EXERCISE / "mutants" / "no_zero_grad.py"


def graded(site, path) -> int:
    submission_id = site.stack.api(STUDENT).submit(EXERCISE, path.read_text()).json()["id"]
    found = settle(site.stack, [submission_id], 180)
    assert found[submission_id].status == "graded", site.stack.logs()
    return submission_id


def flashed(page) -> str:
    return " ".join(page.locator("[role=alert]").all_text_contents())


def your_grade(page, site) -> str:
    page.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    facts = dict(
        zip(
            page.locator(".facts dt").all_text_contents(),
            (" ".join(text.split()) for text in page.locator(".facts dd").all_text_contents()),
        )
    )
    assert layout_problems(page) == {}
    return facts["Your grade"]


def points(value: float) -> str:
    return f"{value:g} / {OUT_OF:g}"


def test_partial_credit_is_overtaken_by_a_better_file_and_a_grade_set_holds(
    site, desktop, open_page
):
    wrong = graded(site, WRONG)
    log_in(desktop, site, "prof")
    desktop.goto(site.url(f"/courses/pytorch/submissions/{wrong}"))
    desktop.get_by_text("Adjust this submission's score").click()
    half = OUT_OF / 2
    desktop.fill("input[name=score]", f"{half:g}")
    desktop.get_by_label("Comment for the student (required)").fill(
        "Half marks: the loop is right, the gradients add up."
    )
    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Save the adjusted score").click()
    assert f"The score of submission #{wrong} is adjusted by hand." in flashed(desktop)

    student = open_page("phone")
    log_in(student, site, STUDENT)
    assert your_grade(student, site).startswith(
        f"{points(half)} ✎ (adjusted by hand) your best: #{wrong}"
    )

    right = graded(site, RIGHT)
    assert your_grade(student, site) == f"{points(OUT_OF)} your best: #{right}"
    student.goto(site.url(f"/courses/pytorch/submissions/{wrong}"))
    assert (
        f"The grade on this exercise is the best submission's: #{right}, {points(OUT_OF)}."
        in " ".join(student.locator(".counts").text_content().split())
    )
    desktop.goto(site.url(f"/courses/pytorch/submissions/{wrong}"))
    later = desktop.locator("section", has_text="Later submissions of this student")
    assert later.get_by_role("link", name=f"#{right}").is_visible()

    desktop.goto(site.url(f"/courses/pytorch/staff/students/{STUDENT}/exercises/{EXERCISE}"))
    desktop.get_by_text("Set the grade by hand").click()
    desktop.fill("input[name=score]", "0")
    desktop.get_by_label("Comment for the student (required)").fill(
        "The same file as another student's, line for line."
    )
    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Save the grade").click()
    assert "is set by hand" in flashed(desktop)
    assert layout_problems(desktop) == {}
    desktop.goto(site.url("/courses/pytorch/staff/grades"))
    row = desktop.locator("tr", has_text=f"Student {STUDENT}")
    assert re.search(r"\b0 ✎ \(set by hand\)", " ".join(row.text_content().split()))

    assert your_grade(student, site).startswith(
        f"{points(0)} ✎ (set by an instructor) set by an instructor"
    )
    card = student.locator(".set-grade")
    assert "Your grade is set by an instructor" in card.text_content()
    assert "line for line" in card.text_content()
    student.goto(site.url(f"/courses/pytorch/submissions/{right}"))
    assert "This submission does not change the grade" in student.locator(".counts").text_content()
    assert layout_problems(student) == {}

    desktop.goto(site.url(f"/courses/pytorch/staff/students/{STUDENT}/exercises/{EXERCISE}"))
    desktop.get_by_text("Change the grade set by hand").click()
    with desktop.expect_navigation():  # to the step that confirms it
        desktop.get_by_role("button", name="Remove it: the best submission counts again").click()
    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Remove it: the best submission counts again").click()
    assert your_grade(student, site) == f"{points(OUT_OF)} your best: #{right}"
