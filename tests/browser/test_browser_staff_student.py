"""Issue 37, in a real browser (Debian's Chromium through nginx), at 1366 px and 390 px, in
English and Spanish, axe clean: the staff's page of one student shows their grade on each
exercise and their total, with "Set the grade" beside each, which opens the form that sets it;
a regrade preview whose exercise's files changed since it started says so, publishes nothing
and offers a fresh preview."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
import sqlalchemy as sa
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot
from stack import EXERCISES

pytestmark = [pytest.mark.browser, pytest.mark.services]

STAFF = "/courses/pytorch/staff"
STUDENT = "s01"
SET_ON = "tensors-create"  # the grade form is opened, never saved: no other test reads it
STALE_ON = "conv2d-einsum"  # no other browser test grades it again
WORDS = {
    "en": (
        "Total",
        "Set the grade",
        "The exercise's checks changed after this preview started.",
        "Start a fresh preview",
        "Discard the preview",
    ),
    "es": (
        "Total",
        "Poner la nota",
        "Las comprobaciones del ejercicio cambiaron después de empezar esta vista previa.",
        "Empezar una vista previa nueva",
        "Descartar la vista previa",
    ),
}


@ON_A_DESKTOP_AND_A_PHONE
def test_the_students_page_shows_their_grades_and_sets_one(site, open_page, kind, lang):
    total, set_the_grade, *_ = WORDS[lang]
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"{STAFF}/students/{STUDENT}"))
    grades = page.locator("section.student-grades")
    rows = grades.locator("tbody tr")
    assert rows.count() > 10  # an exercise a row
    footer = " ".join(grades.locator("tfoot tr").text_content().split())
    assert footer.startswith(total) and " / " in footer, footer
    assert grades.get_by_role("link", name=set_the_grade).count() == rows.count()
    assert grades.locator("tfoot").is_visible()
    assert layout_problems(page) == {}
    if lang == "en":
        screenshot(page, f"staff-student-grades-{kind}")
    with page.expect_navigation():
        grades.locator(f"a[href*='/exercises/{SET_ON}?']").click()
    assert page.locator("details#set-grade").get_attribute("open") is not None
    assert page.locator("input[name=score]").is_visible()
    assert layout_problems(page) == {}


def _stale_preview(site) -> int:
    """A preview of STALE_ON started with files the folder no longer holds, and a graded
    submission of s03 for a fresh one to grade again: the preview's id."""
    from server.core.models import Exercise, Regrade, Submission, User, utcnow

    database = site.database()
    try:
        with database.sessions.begin() as session:
            exercise = session.scalar(
                sa.select(Exercise)
                .join(Exercise.course)
                .where(Exercise.slug == STALE_ON, Exercise.course.has(slug="pytorch"))
            )
            users = {u.username: u for u in session.scalars(sa.select(User))}
            session.execute(
                sa.update(Regrade)
                .where(
                    Regrade.exercise_id == exercise.id,
                    Regrade.published_at.is_(None),
                    Regrade.discarded_at.is_(None),
                )
                .values(discarded_at=utcnow())
            )
            code = (EXERCISES / STALE_ON / "reference.py").read_bytes()
            if not session.scalar(
                sa.select(Submission.id).where(Submission.exercise_id == exercise.id)
            ):
                session.add(
                    Submission(
                        user_id=users["s03"].id,
                        exercise_id=exercise.id,
                        filename="work.py",
                        code=code,
                        sha256=hashlib.sha256(code).hexdigest(),
                        status="graded",
                        score=0.0,
                        max_score=10.0,
                        submitted_at=utcnow() - dt.timedelta(hours=1),
                    )
                )
            regrade = Regrade(
                exercise_id=exercise.id,
                started_by=users["prof"].id,
                started_at=utcnow(),
                exercise_version="0" * 64,  # files that changed since
            )
            session.add(regrade)
            session.flush()
            return regrade.id
    finally:
        database.engine.dispose()


@ON_A_DESKTOP_AND_A_PHONE
def test_a_stale_preview_says_so_and_offers_a_fresh_one(site, open_page, kind, lang):
    *_, changed, fresh, discard = WORDS[lang]
    regrade_id = _stale_preview(site)
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"{STAFF}/regrades/{regrade_id}"))
    alert = page.locator(".stale-preview")
    assert changed in " ".join(alert.inner_text().split())
    assert page.locator("form[action$='/publish']").count() == 0
    assert layout_problems(page) == {}
    if lang == "en":
        screenshot(page, f"staff-stale-preview-{kind}")
    with page.expect_navigation():
        page.get_by_role("button", name=fresh).click()
    assert not page.url.endswith(f"/regrades/{regrade_id}")
    assert "/regrades/" in page.url
    assert page.locator(".stale-preview").count() == 0
    assert layout_problems(page) == {}
    with page.expect_navigation():
        page.get_by_role("button", name=discard).click()
