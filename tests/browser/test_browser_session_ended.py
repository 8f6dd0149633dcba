"""A form sent after its session ended keeps the work: a student whose cookie is gone (or who
logged out elsewhere) and who sends pasted code comes back, after logging in again, to the
exercise's page with the code back in the form and the chosen file named; a refusal comes back
to the page (a reload shows it again, never "Not possible here"), the code kept. On a phone
and a desktop, in English and Spanish."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, SUBMIT, log_in
from stack import EXERCISES

pytestmark = [pytest.mark.browser, pytest.mark.services]

EXERCISE = "tensors-combine"  # s02 sends nothing that is graded to it
PAGE = f"/courses/pytorch/exercises/{EXERCISE}"
CODE = (EXERCISES / EXERCISE / "reference.py").read_text()
SAID = {
    "en": (
        "Your session ended: log in and send it again.",
        "The code you were sending is back in the form.",
        "You had chosen the file work.py: choose it again.",
    ),
    "es": (
        "Tu sesión terminó: inicia sesión y envíalo de nuevo.",
        "El código que enviabas vuelve a estar en el formulario.",
        "Habías elegido el archivo work.py: elígelo de nuevo.",
    ),
}


def alerts(page) -> str:
    return " ".join(page.locator("[role=alert]").all_text_contents())


@ON_A_DESKTOP_AND_A_PHONE
def test_code_sent_after_the_session_ended_is_kept(site, open_page, kind, lang, tmp_path):
    page = open_page(kind)
    log_in(page, site, "s02")
    page.goto(site.url(PAGE))
    work = tmp_path / "work.py"
    work.write_text(CODE)
    form = page.locator("form.submit-form")
    form.locator("input[name=file]").set_input_files(str(work))
    form.locator("textarea[name=code]").fill(CODE)
    page.context.clear_cookies()  # the session gone, as after a password changed elsewhere
    with page.expect_navigation():
        form.locator(SUBMIT).click()
    ended, kept_code, kept_file = SAID[lang]
    assert "/login" in page.url and ended in alerts(page), alerts(page)
    page.fill("input[name=username]", "s02")
    page.fill("input[name=password]", site.password("s02"))
    with page.expect_navigation():
        page.locator("form:has(input[name=password]) [type=submit]").click()
    assert page.url.endswith(f"{PAGE}?kept=1"), page.url
    assert page.locator("textarea[name=code]").input_value() == CODE
    note = page.locator(".kept-note")
    assert note.is_visible() and note.text_content() == f"{kept_code} {kept_file}"
    # the form in view: on a phone it is far down the page
    top = page.locator("textarea[name=code]").evaluate("e => e.getBoundingClientRect().top")
    assert 0 <= top < page.viewport_size["height"], top


@ON_A_DESKTOP_AND_A_PHONE
def test_a_refusal_comes_back_to_the_page_with_the_code(site, open_page, kind, lang):
    page = open_page(kind)
    log_in(page, site, "s02")
    page.goto(site.url(PAGE))
    broken = "def stack_rows(x):\n    return x +\n"
    page.locator("textarea[name=code]").fill(broken)
    with page.expect_navigation():
        page.locator(f"form.submit-form {SUBMIT}").click()
    assert page.url.endswith(f"{PAGE}?kept=1"), page.url
    said = alerts(page)
    assert ("(pasted code, line 2)" if lang == "en" else "(código pegado, línea 2)") in said, said
    assert page.locator("#submit [role=alert]").count() == 1  # beside the form
    assert page.locator("textarea[name=code]").input_value() == broken
    page.reload()  # a phone reloading the tab: the page again, the code again
    assert page.locator("h1").count() == 1 and "405" not in page.title()
    assert page.locator("textarea[name=code]").input_value() == broken
