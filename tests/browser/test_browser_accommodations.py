"""Issue 23, accommodations and bulk actions, in a real browser (Debian's Chromium through
nginx): an instructor gives a student an accommodation from the student's page (extra days on
every deadline, a factor on every limit of attempts), the student sees their deadlines and
attempts extended, the instructor removes it through its confirmation step; one exception for
several students at once, refused whole when a username is no student's. At 1366 px and 390 px,
in English and Spanish, axe clean."""

from __future__ import annotations

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.services]

STUDENT = "s03"  # its accommodation is removed again before the test ends
STAFF = "/courses/pytorch/staff"
BULK_EXERCISE = "training-step"  # no other browser test reads its attempts
# the exercises' deadline, 31 Jan 2027 23:59 in Madrid, two days later
EXTENDED = {"en": "2 Feb 2027", "es": "2 feb 2027"}
WHY = {
    "en": (
        "The exercise allows 20: your accommodation gives 1.5 times as many.",
        "Moved for you: the 2 extra days of your accommodation",
    ),
    "es": (
        "El ejercicio permite 20: tu adaptación te da 1,5 veces más.",
        "Cambiado para ti: los 2 días adicionales de tu adaptación",
    ),
}


def no_errors(page) -> None:
    assert page.locator(".flash.error").count() == 0, page.locator(".flash").all_text_contents()


@ON_A_DESKTOP_AND_A_PHONE
def test_an_accommodation_extends_every_deadline_and_limit(site, open_page, kind, lang):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"{STAFF}/students/{STUDENT}"))
    with page.expect_navigation():
        page.locator(f"a[href$='/students/{STUDENT}/accommodation']").click()
    assert layout_problems(page) == {}
    page.fill("input[name=extra_days]", "2")
    page.fill("input[name=attempts_factor]", "1,5" if lang == "es" else "1.5")
    page.fill("textarea[name=comment]", "plan 41")
    if kind == "desktop" and lang == "en":
        screenshot(page, "staff-accommodation-form")
    with page.expect_navigation():
        page.locator("form.accommodation-form button[type=submit]").click()
    no_errors(page)
    assert page.url.endswith(f"{STAFF}/students/{STUDENT}")
    assert "plan 41" in page.locator("main").inner_text()
    # 20 attempts × 1.5 on every exercise, in the exceptions' table
    assert page.locator("main td", has_text="30").count() > 5
    assert layout_problems(page) == {}
    if kind == "desktop" and lang == "en":
        screenshot(page, "staff-accommodation")

    student = open_page(kind)
    log_in(student, site, STUDENT)
    student.goto(site.url("/courses/pytorch/"))
    assert EXTENDED[lang] in student.locator("main").inner_text()
    assert layout_problems(student) == {}
    # the exercise's page says why its deadline and attempts are not everyone's
    student.goto(site.url("/courses/pytorch/exercises/tensors-create"))
    facts = " ".join(student.locator(".facts").inner_text().split())
    assert WHY[lang][0] in facts and WHY[lang][1] in facts, facts
    assert layout_problems(student) == {}

    page.goto(site.url(f"{STAFF}/students/{STUDENT}/accommodation"))
    with page.expect_navigation():
        page.locator("form[method=get][action$='/accommodation/remove'] button").click()
    assert layout_problems(page) == {}
    with page.expect_navigation():
        page.locator("main form[method=post] button[type=submit]").click()
    no_errors(page)
    assert page.locator(f"a[href$='/students/{STUDENT}/accommodation']").count() == 1
    student.reload()
    assert EXTENDED[lang] not in student.locator("main").inner_text()


@ON_A_DESKTOP_AND_A_PHONE
def test_one_exception_for_several_students_all_or_nothing(site, open_page, kind, lang):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(f"{STAFF}/exceptions"))
    assert layout_problems(page) == {}
    page.select_option("select[name=exercise]", BULK_EXERCISE)
    with page.expect_navigation():
        page.locator("main form[method=get] button[type=submit]").click()
    page.fill("textarea[name=usernames]", "s00\nnobody")
    page.check("input[name=student][value=s01]")
    page.fill("input[name=extra_attempts]", "2")
    with page.expect_navigation():
        page.locator("form.bulk-exceptions button[type=submit]").click()
    assert "nobody" in page.locator(".flash.error").inner_text()
    assert page.locator("input[name=student][value=s01]").is_checked()  # kept to correct
    assert layout_problems(page) == {}

    page.fill("textarea[name=usernames]", "s00")
    if kind == "desktop" and lang == "en":
        screenshot(page, "staff-bulk-exceptions")
    with page.expect_navigation():
        page.locator("form.bulk-exceptions button[type=submit]").click()
    no_errors(page)
    assert page.locator(".flash").count() == 1
    page.goto(site.url(f"{STAFF}/students/s01"))
    row = page.locator("main tr", has=page.locator(f"a[href$='/exercises/{BULK_EXERCISE}']"))
    assert "22" in row.inner_text()
