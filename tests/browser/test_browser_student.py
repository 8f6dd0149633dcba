"""A student in a real browser (Debian's Chromium), through nginx, on the whole service: logging
in, uploading and pasting solutions, hearing the live status of a submission; the exercise page's
points, attempts and deadline; code that does not compile and files over the upload limit refused
before they cost an attempt, the pasted code kept; the diagnostics in Spanish; the language chosen
on the log-in page kept after it; and every student page on a phone and a desktop: nothing wider
than the screen, no WCAG 2 A/AA violation that axe-core finds, in English and Spanish.
Any console error or CSP violation on a page fails its test (browser_fixtures.open_page)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
import sqlalchemy as sa
from browser import SUBMIT, live_states, log_in, screenshot, walk
from stack import EXERCISES, settle, slow, submissions

from server.core.catalogue import max_points
from server.core.models import Submission, User
from server.web.submissions import PASTED

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "autograd-q"
REFERENCE = EXERCISES / EXERCISE / "reference.py"
MUTANT = EXERCISES / EXERCISE / "mutants" / "plus_b_squared.py"  # grad-sign-flipped
NONSCALAR = EXERCISES / EXERCISE / "mutants" / "backward_without_gradient.py"  # nonscalar-backward
REFERENCE_RESHAPE = EXERCISES / "tensors-reshape" / "reference.py"
SUBMISSION_PAGE = re.compile(r"/courses/pytorch/submissions/(\d+)$")
STATES = ("queued", "running", "graded", "grader error", "cancelled")


def announced(texts: list[str]) -> list[str]:
    """The states that the live region's texts name, each once, in order."""
    heard: list[str] = []
    for text in texts:
        state = next((s for s in STATES if text.lower().startswith(s)), None)
        if state and (not heard or heard[-1] != state):
            heard.append(state)
    return heard


def submit(page, site, *, upload=None, paste: str | None = None) -> int:
    """Through the exercise's form, as the student does; the new submission's id."""
    page.goto(site.url(f"/courses/pytorch/exercises/{EXERCISE}"))
    form = page.locator("form:has(textarea[name=code])")
    if upload:
        form.locator("input[name=file]").set_input_files(str(upload))
    if paste:
        form.locator("textarea[name=code]").fill(paste)
    with page.expect_navigation():
        form.locator(SUBMIT).click()
    accepted = SUBMISSION_PAGE.search(page.url)
    assert accepted, f"refused: {page.locator('[role=alert]').all_text_contents()}"
    return int(accepted[1])


def test_a_student_submits_and_hears_the_status_change(site, desktop, tmp_path):
    log_in(desktop, site, "s00")  # in both courses: she picks one
    desktop.locator("main a[href='/courses/pytorch/']").click()
    desktop.locator(f"main a[href='/courses/pytorch/exercises/{EXERCISE}']").click()
    desktop.locator("textarea[name=code]").wait_for()

    site.stack.wait_idle()  # both slots free: nothing of an earlier test still graded
    # two other students' slow files hold both grading slots (9 s of loading each, under the
    # 10 s limit: time enough for a loaded machine's browser to show the page while they do):
    # this one waits its turn, and its own three seconds of loading keep it running long
    # enough to be seen. They hold the slots before it comes, or the queue's round-robin
    # between students could put it before one of them
    blockers = [
        site.stack.api(name).submit(EXERCISE, slow(REFERENCE.read_text(), 9))
        for name in ("s01", "s02")
    ]
    assert [answer.status_code for answer in blockers] == [202, 202]
    held = settle(site.stack, [answer.json()["id"] for answer in blockers], 30, past=("queued",))
    assert [s.status for s in held.values()] == ["running", "running"]
    upload = tmp_path / "reference.py"
    upload.write_text(slow(REFERENCE.read_text(), 3))
    right = submit(desktop, site, upload=upload)
    shown = live_states(desktop)
    assert announced(shown) == ["queued", "running", "graded"], shown

    wrong = submit(desktop, site, paste=MUTANT.read_text())
    shown = live_states(desktop)
    assert announced(shown)[-1:] == ["graded"], shown
    # once graded, the page shows the result by itself: the diagnostic that names the mistake
    desktop.get_by_text("grad-sign-flipped").first.wait_for(timeout=10_000)

    found = submissions(site.stack, [right, wrong])
    assert (found[right].filename, found[right].status) == ("reference.py", "graded")
    assert found[right].score == found[right].max_score
    assert found[wrong].status == "graded" and found[wrong].score < found[wrong].max_score
    assert found[wrong].filename == PASTED


# --- the exercise page: what is at stake, and what is refused before it costs an attempt ------

REFUSED = "tensors-reshape"  # s01 submits nothing to it: its attempts stay 20 of 20
BROKEN = "import torch\n\n\ndef swap_halves(x):\n    return x +\n"  # line 5 does not compile


def facts(page) -> dict[str, str]:
    """The exercise page's facts (Points, Attempts left, Deadline…), as their DOM text."""
    terms = page.locator(".facts dt").all_text_contents()
    values = [" ".join(text.split()) for text in page.locator(".facts dd").all_text_contents()]
    return dict(zip(terms, values))


def flashed(page) -> str:
    return " ".join(page.locator("[role=alert]").all_text_contents())


def stored_submissions(site, username: str) -> int:
    database = site.database()
    try:
        with database.sessions() as session:
            return session.scalar(
                sa.select(sa.func.count())
                .select_from(Submission)
                .join(User, Submission.user_id == User.id)
                .where(User.username == username)
            )
    finally:
        database.dispose()


def send_form(page, *, upload=None, paste: str = "") -> None:
    """The exercise's form as the student fills it in; the page that answers."""
    form = page.locator("form:has(textarea[name=code])")
    if upload:
        form.locator("input[name=file]").set_input_files(str(upload))
    form.locator("textarea[name=code]").fill(paste)
    with page.expect_navigation():
        form.locator(SUBMIT).click()


def test_the_exercise_page_states_points_attempts_and_deadline(site, desktop):
    log_in(desktop, site, "s01")
    desktop.goto(site.url(f"/courses/pytorch/exercises/{REFUSED}"))
    shown = facts(desktop)
    assert shown["Points"] == f"{max_points(EXERCISES / REFUSED / 'checks.py'):g}"
    assert shown["Attempts left"] == "20 of 20"
    # exercise.toml's 2027-01-31T23:59+01:00, in the course's time zone (UTC here), and how far
    assert desktop.locator(".facts time").get_attribute("datetime") == "2027-01-31T22:59:00+00:00"
    ahead = dt.datetime.now(dt.timezone.utc) < dt.datetime(
        2027, 1, 31, 22, 59, tzinfo=dt.timezone.utc
    )
    assert shown["Deadline"].startswith(
        "31 Jan 2027, 22:59 UTC " + ("due in" if ahead else "closed")
    ), shown


def test_code_that_cannot_load_is_refused_before_it_costs_an_attempt(site, desktop, tmp_path):
    log_in(desktop, site, "s01")
    desktop.goto(site.url(f"/courses/pytorch/exercises/{REFUSED}"))
    before = stored_submissions(site, "s01")

    send_form(desktop, paste=BROKEN)
    said = flashed(desktop)
    assert "not valid Python" in said and "(pasted code, line 5)" in said, said
    assert "no attempt was used" in said
    assert desktop.locator("textarea[name=code]").input_value() == BROKEN

    broken = tmp_path / "swap.py"
    broken.write_text(BROKEN)
    send_form(desktop, upload=broken)
    assert "(swap.py, line 5)" in flashed(desktop), flashed(desktop)

    assert facts(desktop)["Attempts left"] == "20 of 20"
    assert stored_submissions(site, "s01") == before


@pytest.mark.parametrize("size_kb", [1229, 20480])  # 1.2 MB and 20 MB, through nginx
def test_an_oversized_upload_states_the_limit_and_keeps_the_pasted_code(
    site, desktop, tmp_path, size_kb
):
    log_in(desktop, site, "s01")
    desktop.goto(site.url(f"/courses/pytorch/exercises/{REFUSED}"))
    big = tmp_path / "big.py"
    line = "x = 1  # padding\n"
    big.write_text(line * (size_kb * 1024 // len(line) + 1))
    pasted = REFERENCE_RESHAPE.read_text()
    before = stored_submissions(site, "s01")

    send_form(desktop, upload=big, paste=pasted)
    said = flashed(desktop)
    assert "The file is larger than 1024 KB" in said and "Clear All Outputs" in said, said
    assert desktop.locator("textarea[name=code]").input_value() == pasted
    assert stored_submissions(site, "s01") == before


# --- reading a result in Spanish ---------------------------------------------------------------

STUDENT = "s03"


@pytest.fixture(scope="module")
def graded_wrong(site) -> int:
    """STUDENT's wrong submission, sent through the API and graded: a result whose diagnostics
    and hints are full of inline code (`backward()`, `gradient=`), of a file with a line wider
    than a phone (its code view scrolls sideways)."""
    wide = "# Q = 3a³ − b² is not a scalar: backward() needs a gradient of Q's shape, v, to start\n"
    answer = site.stack.api(STUDENT).submit(EXERCISE, wide + NONSCALAR.read_text())
    submission_id = answer.json()["id"]
    found = settle(site.stack, [submission_id], 120)
    assert found[submission_id].status == "graded", site.stack.logs()
    return submission_id


@pytest.mark.parametrize("lang", ["es"])
def test_a_student_reads_the_diagnostics_in_spanish(site, desktop, graded_wrong, lang):
    log_in(desktop, site, STUDENT)
    desktop.goto(site.url(f"/courses/pytorch/submissions/{graded_wrong}"))
    assert desktop.locator("html").get_attribute("lang") == "es"
    assert desktop.locator("#live").text_content().strip() == "corregida"
    diagnostic = desktop.locator(".check .diagnostic").first
    assert diagnostic.locator("code.code").text_content() == "nonscalar-backward"
    message, hint = diagnostic.locator("p").nth(0), diagnostic.locator("p.hint")
    assert "sobre un tensor no escalar" in message.text_content()
    # "{what} llamó a `backward()` … sin `gradient=`", what being "`q_grads`"
    assert message.locator("code").all_text_contents()[-2:] == ["backward()", "gradient="]
    assert hint.text_content().startswith("Para una salida Q no escalar, llama a")
    assert hint.locator("code").all_text_contents() == ["Q.backward(gradient=v)"]
    assert "entradas 2-D" in desktop.locator(".check h2").all_text_contents()[2]
    assert "`" not in desktop.locator("main").text_content()  # every backtick became <code>


# --- the language chosen on the log-in page ---------------------------------------------------


def test_the_language_chosen_on_the_log_in_page_survives_logging_in(site, desktop):
    desktop.goto(
        site.url("/courses/pytorch/submissions")
    )  # not logged in: the log-in page, next=/submissions
    desktop.locator("a[hreflang=es]").click()
    desktop.wait_for_url(re.compile(r"lang=es"))
    assert desktop.locator("html").get_attribute("lang") == "es"
    assert desktop.locator("h1").text_content() == "Entrar"
    desktop.fill("input[name=username]", "s02")
    desktop.fill("input[name=password]", site.password("s02"))
    with desktop.expect_navigation():
        desktop.locator("form:has(input[name=password]) [type=submit]").click()
    assert desktop.url == site.url("/courses/pytorch/submissions")
    assert desktop.locator("html").get_attribute("lang") == "es"
    desktop.goto(site.url("/"))
    assert desktop.locator("h1").text_content() == "Mis cursos"


# --- every student page on a phone, and on a desktop -------------------------------------------

STUDENT_PAGES = {
    "courses": "/",
    "exercises": "/courses/pytorch/",
    "exercise": f"/courses/pytorch/exercises/{EXERCISE}",
    "result": "/courses/pytorch/submissions/{id}",
    "history": "/courses/pytorch/submissions",
    "account": "/account/tokens",
    "password": "/account/password",
    "error": "/courses/pytorch/exercises/no-such-exercise",
}


@pytest.mark.parametrize("lang", ["en", "es"])
def test_student_pages_fit_a_phone_and_pass_axe(site, phone, graded_wrong, lang):
    log_in(phone, site, STUDENT)
    # the language comes from the browser's Accept-Language: neither ?lang= nor the session chose
    assert walk(phone, site, STUDENT_PAGES, lang, id=graded_wrong) == {}
    if lang == "en":
        phone.goto(site.url(f"/courses/pytorch/submissions/{graded_wrong}"))
        screenshot(phone, "student-result-phone")


def test_student_pages_fit_a_desktop(site, desktop, graded_wrong):
    log_in(desktop, site, STUDENT)
    # axe ran in the phone walks, where narrow columns and scrolling boxes give it most to find
    assert walk(desktop, site, STUDENT_PAGES, "en", axe=False, id=graded_wrong) == {}
    desktop.goto(site.url(f"/courses/pytorch/submissions/{graded_wrong}"))
    screenshot(desktop, "student-result")
