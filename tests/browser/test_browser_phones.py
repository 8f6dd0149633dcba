"""A student's scores on a phone (390 px), in a real browser (Debian's Chromium) through nginx:
once an instructor has set a grade by hand and adjusted a submission's score, neither the exercise
list, the exercise page, "my submissions" nor the result page is wider than the phone (the words
for screen readers, "(set by an instructor)", stay inside their table), and on each the score, the
status and the attempts left are on the screen without scrolling sideways, each score on one line.
The gradebook keeps its header row and its names in sight as it scrolls."""

from __future__ import annotations

import pytest
from browser import layout_problems, log_in, screenshot
from sqlalchemy import select
from stack import EXERCISES, settle

from server.core.models import Exercise, SetGrade, Submission, User

pytestmark = [pytest.mark.browser, pytest.mark.services]

# a student and exercises no other browser test sends anything to
STUDENT = "s03"
ADJUSTED = "tensors-create"  # a submission whose score an instructor adjusted
SET = "tensors-combine"  # a grade an instructor set by hand (with two decimals)
PHONE_WIDTH = 390


@pytest.fixture(scope="module")
def marked(site) -> int:
    """The student's graded submission of ADJUSTED, its score adjusted, and a grade set on SET:
    what an instructor does through the staff pages (tests/browser/test_browser_grades.py clicks
    through them), written here as they store it."""
    code = (EXERCISES / ADJUSTED / "reference.py").read_text()
    submission_id = site.stack.api(STUDENT).submit(ADJUSTED, code).json()["id"]
    assert settle(site.stack, [submission_id], 180)[submission_id].status == "graded", (
        site.stack.logs()
    )
    database = site.database()
    try:
        with database.sessions.begin() as session:
            student = session.scalar(select(User).where(User.username == STUDENT))
            submission = session.get(Submission, submission_id)
            submission.override_score = 0.5 * submission.max_score + 0.29
            submission.override_comment = "Half marks, and a little more."
            exercise = session.scalar(
                select(Exercise).where(Exercise.slug == SET, Exercise.course.has(slug="pytorch"))
            )
            session.add(
                SetGrade(
                    user_id=student.id,
                    exercise_id=exercise.id,
                    score=9.29,
                    comment="Agreed in person.",
                )
            )
    finally:
        database.dispose()
    return submission_id


def off_screen(page, selector: str) -> list[str]:
    """The elements matched that are not wholly within the window, as "text: left–right"."""
    return page.evaluate(
        """([selector, width]) => [...document.querySelectorAll(selector)]
        .filter(el => { const box = el.getBoundingClientRect();
                        return box.width && (box.left < 0 || box.right > width + 0.5); })
        .map(el => { const box = el.getBoundingClientRect();
                     return `${el.textContent.trim()}: ${Math.round(box.left)}–${Math.round(box.right)}`; })
        """,
        [selector, PHONE_WIDTH],
    )


def broken_scores(page) -> list[str]:
    """The scores ("9.29 / 10") that the page breaks over more than one line."""
    return page.evaluate("""() => [...document.querySelectorAll(".score-value, .score, td.col-score")].filter(el => {
            const range = document.createRange();
            range.selectNodeContents(el);
            const lines = new Set([...range.getClientRects()].filter(box => box.width > 1)
                                   .map(box => Math.round(box.bottom)));
            return lines.size > 1; }).map(el => el.textContent)""")


STUDENT_PAGES = {
    "exercises": "/courses/pytorch/",
    "adjusted": f"/courses/pytorch/exercises/{ADJUSTED}",
    "set": f"/courses/pytorch/exercises/{SET}",
    "history": "/courses/pytorch/submissions",
    "result": "/courses/pytorch/submissions/{id}",
}
# what a student looks for first, in the tables' columns, and the words that say a score was
# set or adjusted by hand, for screen readers (hidden, but where the score is)
LOOKED_FOR = "td.col-score, td.col-status, td.col-attempts, td .visually-hidden"


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_student_sees_scores_status_and_attempts_left_on_a_phone(site, phone, marked, lang):
    log_in(phone, site, STUDENT)
    found = {}
    for name, path in STUDENT_PAGES.items():
        phone.goto(site.url(path.format(id=marked)))
        assert phone.locator("html").get_attribute("lang") == lang
        problems = layout_problems(phone)
        if missed := off_screen(phone, LOOKED_FOR):
            problems["off screen"] = missed
        if broken := broken_scores(phone):
            problems["score on two lines"] = broken
        if problems:
            found[name] = problems
    assert found == {}

    phone.goto(site.url("/courses/pytorch/"))
    row = phone.locator("tr", has=phone.locator(f'a[href$="/exercises/{SET}"]'))
    set_grade = "9,29 / 10" if lang == "es" else "9.29 / 10"
    assert row.locator("td.col-score").text_content().strip().startswith(set_grade)
    assert row.locator("td.col-score").is_visible()
    assert row.locator("td.col-attempts").is_visible()
    if lang == "en":
        screenshot(phone, "student-exercises-phone")
    phone.goto(site.url("/courses/pytorch/submissions"))
    row = phone.locator("tr", has=phone.get_by_role("link", name=f"#{marked}"))
    assert row.locator("td.col-status").is_visible() and row.locator("td.col-score").is_visible()


def edges(page) -> dict[str, float]:
    """How far the gradebook's header row and its first student's name are from the top and
    the left of its scrolling box."""
    return page.evaluate("""() => {
        const box = document.querySelector(".table-wrap.gradebook").getBoundingClientRect();
        const head = document.querySelector("table.grid thead th").getBoundingClientRect();
        const name = document.querySelector("table.grid tbody th").getBoundingClientRect();
        return {head_top: head.top - box.top, name_left: name.left - box.left}; }""")


@pytest.mark.parametrize("lang", ["en", "es"])
def test_the_gradebook_keeps_its_header_and_names_in_sight(site, phone, marked, lang):
    """On a phone, short enough that even four students scroll (the exercises headed by their
    numbers, the header is short), the header row stays at the
    top of the gradebook's box and the names at its left as it scrolls both ways; the page
    itself is no wider than the phone, ✎ and its hidden words included."""
    log_in(phone, site, "prof")
    phone.set_viewport_size({"width": PHONE_WIDTH, "height": 260})
    phone.goto(site.url("/courses/pytorch/staff/grades"))
    assert phone.locator("html").get_attribute("lang") == lang
    assert layout_problems(phone) == {}
    before = edges(phone)
    scrolled = phone.evaluate("""() => { const box = document.querySelector(".table-wrap.gradebook");
        box.scrollTo(box.scrollWidth, box.scrollHeight);
        return [box.scrollLeft, box.scrollTop]; }""")
    assert scrolled[0] > 100 and scrolled[1] > 20  # it did scroll, both ways
    assert edges(phone) == pytest.approx(before, abs=1)
    row = phone.locator("tr", has=phone.locator(f'a[href$="/students/{STUDENT}"]'))
    assert row.locator("th").is_visible()
