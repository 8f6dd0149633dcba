"""Check on an exercise's page, in a real browser (Debian's Chromium) through nginx on the whole
service: the visible checks run by the Celery worker on the pasted code, their result on a page
of its own that updates by itself, with no attempt used and no submission made. At 1366 px and
390 px, in English and Spanish, axe clean; any console error or CSP violation fails the test
(conftest.open_page)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in
from stack import EXERCISES

from server.core.models import Exercise, Submission, User

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "embeddings"  # no other browser test submits to it
WRONG = EXERCISES / EXERCISE / "mutants" / "batch_first.py"
ATTEMPTS_LEFT = {"en": "20 attempts left", "es": "20 intentos"}


def submitted(site, username: str) -> int:
    database = site.stack.database()
    try:
        with database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.count())
                .select_from(Submission)
                .join(Submission.user)
                .join(Submission.exercise)
                .where(User.username == username, Exercise.slug == EXERCISE)
            )
    finally:
        database.dispose()


@ON_A_DESKTOP_AND_A_PHONE
def test_check_shows_the_visible_checks_and_uses_no_attempt(site, open_page, kind, lang):
    page = open_page(kind)
    log_in(page, site, "s03")
    page.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    page.locator("textarea[name=code]").fill(WRONG.read_text())
    with page.expect_navigation():
        page.locator("button[formaction$='/check']").click()
    assert "/courses/pytorch/checks/" in page.url
    page.locator("strong.score").wait_for(timeout=180_000)  # the page reloads itself meanwhile
    assert page.locator("section.check.failed").count() >= 1
    assert page.locator("section.check.failed .diagnostic code.code").count() >= 1
    assert ATTEMPTS_LEFT[lang] in page.locator("#summary").inner_text()
    assert layout_problems(page) == {}
    assert submitted(site, "s03") == 0
