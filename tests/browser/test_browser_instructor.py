"""An instructor in a real browser (Debian's Chromium), through nginx, on the whole service:
landing on the course, reading an exercise's charts and the submissions behind a diagnostic,
grading everything again with a preview before publishing, granting one student an extension,
downloading the gradebook; and the staff pages on a phone and a desktop: nothing wider than the
screen, no WCAG 2 A/AA violation that axe-core finds. Any console error or CSP violation on a page
fails its test (browser_fixtures.open_page)."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import tomllib
from pathlib import Path

import pytest
from browser import layout_problems, log_in, screenshot, walk
from stack import EXERCISES, FILES, settle, submissions

from server.core.catalogue import max_points
from server.core.models import Submission

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "metrics"
TITLE = "Accuracy and mean absolute error"
OUT_OF = max_points(EXERCISES / EXERCISE / "checks.py")
MISTAKE = "output-mismatch"  # what mutants/mae_without_abs.py gets
# s00 sends a right file, s01 and s02 the same mistake; s03 sends nothing
SENT = {
    "s00": FILES["metrics-right"][1],
    "s01": FILES["metrics-wrong"][1],
    "s02": FILES["metrics-wrong"][1],
}


def exercise_deadline(slug: str) -> dt.datetime:
    with (EXERCISES / slug / "exercise.toml").open("rb") as f:
        return tomllib.load(f)["deadline"]["at"].astimezone(dt.timezone.utc)


@pytest.fixture(scope="module")
def graded(site) -> dict[str, int]:
    """Each of SENT's submissions, sent through the API and graded: username → its id."""
    ids = {
        name: site.stack.api(name).submit(EXERCISE, path.read_text()).json()["id"]
        for name, path in SENT.items()
    }
    found = settle(site.stack, list(ids.values()), 180)
    assert [s.status for s in found.values()] == ["graded"] * len(ids), site.stack.logs()
    return ids


def flashed(page) -> str:
    return " ".join(page.locator("[role=alert]").all_text_contents())


def cells(page, table: str) -> list[list[str]]:
    """The text of each body row's cells (th and td), white space collapsed."""
    return page.locator(f"{table} tbody tr").evaluate_all(
        "rows => rows.map(r => [...r.cells].map(c => c.textContent.split(/\\s+/)"
        ".filter(Boolean).join(' ')))"
    )


def stored_score(site, submission_id: int, score: float | None = None) -> float:
    """A submission's score in the database; first set to `score` when one is given."""
    database = site.database()
    try:
        with database.sessions() as session:
            submission = session.get(Submission, submission_id)
            if score is not None:
                submission.score = score
                session.commit()
            return submission.score
    finally:
        database.dispose()


# --- the course, the charts, a diagnostic --------------------------------------------------


def test_an_instructor_lands_on_the_course_and_reads_the_charts(site, desktop, graded):
    log_in(desktop, site, "prof")
    assert desktop.url == site.url("/courses/pytorch/staff/")
    assert desktop.locator("h1").text_content().startswith("Course")
    screenshot(desktop, "instructor-course")

    desktop.locator("table.course").get_by_role("link", name=TITLE, exact=True).click()
    desktop.wait_for_url(site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}"))
    histogram = desktop.locator("#charts svg.chart")
    assert histogram.get_attribute("role") == "img"
    # one full mark and two lower scores, said in words too (the chart's <desc>)
    assert histogram.locator("rect.bar.full").count() == 1
    assert histogram.locator("desc").text_content().startswith("The best scores of 3 students")
    bar = desktop.locator("#diagnostics svg.chart a").first
    assert bar.get_attribute("aria-label") == f"{MISTAKE}: 2 students"

    bar.click()
    desktop.wait_for_url(
        site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}/diagnostics/{MISTAKE}")
    )
    rows = cells(desktop, "table")
    assert [row[0].split()[-1] for row in rows] == ["s01", "s02"]  # "Student s01 s01"
    assert [row[1].split()[0] for row in rows] == [f"#{graded['s01']}", f"#{graded['s02']}"]


# --- grading everything again, with a preview ----------------------------------------------


def test_grade_all_again_shows_a_preview_then_publishes_it(site, desktop, phone, open_page, graded):
    # as if the checks had given the right file nothing; s00 then sent the wrong file, which
    # makes their grade: grading again must reach the right one, their first
    right = graded["s00"]
    assert stored_score(site, right, 0.0) == 0.0
    wrong = site.stack.api("s00").submit(EXERCISE, SENT["s01"].read_text()).json()["id"]
    assert settle(site.stack, [wrong], 180)[wrong].status == "graded", site.stack.logs()
    wrong_score = stored_score(site, wrong)
    log_in(desktop, site, "prof")
    desktop.goto(site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}"))
    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Grade all again").click()
    assert re.search(r"/courses/pytorch/staff/regrades/\d+$", desktop.url), flashed(desktop)
    preview = desktop.url

    # the page loads itself again every few seconds until every preview run is graded
    desktop.get_by_role("button", name="Publish these grades").wait_for(timeout=150_000)
    out_of, was = f"{OUT_OF:g}", f"{wrong_score:g}"
    shown = {
        row[0].split()[-1]: row[1:4] + row[5:]  # the submissions' list left out
        for row in cells(desktop, "table.regrade-table")
    }
    assert shown["s00"] == [
        f"{was} / {out_of}",
        f"{out_of} / {out_of}",
        f"+{OUT_OF - wrong_score:g}",
        "ready",
    ]
    for name in ("s01", "s02"):
        before, after, change, state = shown[name]
        assert (after, change, state) == (before, "+0", "ready"), shown
    summary = desktop.locator(".regrade-summary li").all_text_contents()
    assert summary[:4] == [
        "2 unchanged",
        "1 up",
        "0 down",
        "Submissions whose score changed: 1 of 4",
    ]
    s00 = desktop.locator("table.regrade-table tr", has_text="s00")
    s00.locator("summary").click()  # the student's submissions, each before and after
    items = [
        " ".join(item.split())
        for item in s00.locator(".regrade-submissions li").all_text_contents()
    ]
    assert items == [
        f"#{right} 0 / {out_of} → {out_of} / {out_of} ready",
        f"#{wrong} {was} / {out_of} → {was} / {out_of} ready",
    ]
    assert stored_score(site, right) == 0.0  # nothing changes before publishing

    log_in(phone, site, "prof")  # the preview on a phone, ready to publish
    phone.goto(preview)
    assert layout_problems(phone) == {}

    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Publish these grades").click()
    assert "The new scores of 4 submissions are published." in flashed(desktop)
    assert desktop.locator("#regrade .tag").first.text_content() == "published"
    assert stored_score(site, right) == OUT_OF
    assert submissions(site.stack, [right])[right].status == "graded"

    student = open_page("desktop")  # s00 reads their new grade, from their first submission
    log_in(student, site, "s00")
    student.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    facts = dict(
        zip(
            student.locator(".facts dt").all_text_contents(),
            (" ".join(value.split()) for value in student.locator(".facts dd").all_text_contents()),
        )
    )
    assert facts["Your grade"] == f"{out_of} / {out_of} your best: #{right}"


# --- one student's extension ---------------------------------------------------------------


def test_an_extension_and_extra_attempts_reach_the_student(site, desktop, open_page, graded):
    log_in(desktop, site, "prof")
    desktop.goto(site.url("/courses/pytorch/staff/students/s02"))
    exercise_row = desktop.locator("tr", has_text=TITLE)
    exercise_row.get_by_role("link", name="Grant an exception").click()
    desktop.wait_for_url(site.url(f"/courses/pytorch/staff/students/s02/exercises/{EXERCISE}"))
    # a month after the exercise's deadline or today, whichever is later; in the course's zone, UTC
    extended = max(exercise_deadline(EXERCISE), dt.datetime.now(dt.timezone.utc)).replace(
        hour=12, minute=0, second=0, microsecond=0
    ) + dt.timedelta(days=30)
    # with the date picker, in the course's time
    desktop.fill("input[name=deadline]", f"{extended:%Y-%m-%dT%H:%M}")
    desktop.fill("input[name=extra_attempts]", "5")
    desktop.get_by_label("Comment (optional, for the staff)").fill(
        "Ill in the last week of January"
    )
    with desktop.expect_navigation():
        desktop.get_by_role("button", name="Save the exception").click()
    assert "The exception for Student s02 is saved." in flashed(desktop)
    assert layout_problems(desktop) == {}

    student = open_page("desktop")
    log_in(student, site, "s02")
    student.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    values = student.locator(".facts dd").all_text_contents()
    facts = dict(
        zip(
            student.locator(".facts dt").all_text_contents(),
            (" ".join(value.split()) for value in values),
        )
    )
    assert student.locator(".facts time").get_attribute("datetime") == extended.isoformat()
    assert facts["Deadline"].startswith(f"{extended.day} {extended:%b %Y, %H:%M} UTC due in"), facts
    # 20 + 5, one used, and why the limit is not the exercise's
    assert (
        facts["Attempts left"]
        == "24 of 25 The exercise allows 20: your instructor granted you 5 more."
    )


# --- the gradebook as a CSV ----------------------------------------------------------------


def course_order() -> list[str]:
    """The exercises' slugs in the course's order (exercise.toml's `order`, then the slug)."""
    found = [
        (tomllib.loads(path.read_text()).get("order", 0), path.parent.name)
        for path in EXERCISES.glob("*/exercise.toml")
    ]
    return [slug for _order, slug in sorted(found)]


def test_the_gradebook_downloads_as_csv(site, desktop, graded):
    log_in(desktop, site, "prof")
    desktop.goto(site.url("/courses/pytorch/staff/grades"))
    with desktop.expect_download() as started:
        desktop.get_by_role("link", name="Download CSV").click()
    download = started.value
    assert download.suggested_filename == "pytorch-grades.csv"
    rows = list(csv.reader(io.StringIO(Path(download.path()).read_text(encoding="utf-8"))))

    slugs = course_order()
    points = [max_points(EXERCISES / slug / "checks.py") for slug in slugs]
    assert rows[0] == ["username", "name", "email", *slugs, "total", "percent"]
    assert rows[1] == ["", "max_points", "", *(f"{p:g}" for p in points), f"{sum(points):g}", "100"]
    by_student = {row[0]: row for row in rows[2:]}
    assert sorted(by_student) == sorted(site.students)
    column = 3 + slugs.index(EXERCISE)
    assert by_student["s00"][column] == f"{OUT_OF:g}"
    assert by_student["s03"][column] == ""  # nothing submitted


# --- every staff page on a phone, and on a desktop -----------------------------------------

STAFF_PAGES = {
    "course": "/courses/pytorch/staff/",
    "exercise": f"/courses/pytorch/staff/exercises/{EXERCISE}",
    "diagnostic": f"/courses/pytorch/staff/exercises/{EXERCISE}/diagnostics/{MISTAKE}",
    "student": "/courses/pytorch/staff/students/s01",
    "submission": "/courses/pytorch/submissions/{id}",
    "grade-again": "/courses/pytorch/staff/submissions/{id}/regrade",
    "gradebook": "/courses/pytorch/staff/grades",
    "roster": "/courses/pytorch/staff/roster/",
    "add-user": "/courses/pytorch/staff/roster/add",
    "waiting": "/courses/pytorch/staff/roster/waiting",
    "allowance": f"/courses/pytorch/staff/students/s03/exercises/{EXERCISE}",
    "error": "/courses/pytorch/staff/exercises/no-such-exercise",
}


@pytest.mark.parametrize("lang", ["en", "es"])
def test_staff_pages_fit_a_phone_and_pass_axe(site, phone, graded, lang):
    log_in(phone, site, "prof")
    assert walk(phone, site, STAFF_PAGES, lang, id=graded["s01"]) == {}
    if lang == "en":
        phone.goto(site.url(f"/courses/pytorch/staff/exercises/{EXERCISE}"))
        screenshot(phone, "instructor-exercise-phone")


def test_staff_pages_fit_a_desktop(site, desktop, graded):
    log_in(desktop, site, "prof")
    # axe ran in the phone walks, where narrow columns and scrolling boxes give it most to find
    assert walk(desktop, site, STAFF_PAGES, "en", axe=False, id=graded["s01"]) == {}
