"""Issue 23, point 5, in a real browser (Debian's Chromium through nginx): removing an exception
is a step apart from Save, confirmed on a page of its own that needs no script; the exception's
date is picked with the browser's date picker, in the course's time; "Account" opens the account's page; every page has a
favicon and a skip link, first, that shows when the keyboard reaches it. At 1366 px and 390 px,
in English and Spanish, axe clean."""

from __future__ import annotations

import datetime as dt

import pytest
from browser import ON_A_DESKTOP_AND_A_PHONE, layout_problems, log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.services]

# an exercise with a deadline and a student no other browser test grants an exception to
EXERCISE = "autograd-q"
STUDENT = "s03"
PAGE = f"/courses/pytorch/staff/students/{STUDENT}/exercises/{EXERCISE}"


@ON_A_DESKTOP_AND_A_PHONE
def test_an_exception_is_removed_through_a_confirmation_step(site, open_page, kind, lang):
    page = open_page(kind)
    log_in(page, site, "prof")
    page.goto(site.url(PAGE))
    field = page.locator("input[name=deadline]")
    assert field.get_attribute("type") == "datetime-local"  # the browser's date picker
    # a year after the exercise's deadline (31 Jan 2027), whatever today is
    field.fill(f"{max(2027, dt.date.today().year) + 1}-01-31T18:00")
    with page.expect_navigation():
        page.locator(f"form[method=post][action$='{PAGE}'] button[type=submit]").click()
    assert page.locator(".flash.error").count() == 0, page.locator(".flash").all_text_contents()
    assert layout_problems(page) == {}
    if kind == "desktop" and lang == "en":
        screenshot(page, "staff-exception")

    remove = page.locator(f"form[method=get][action$='{PAGE}/remove'] button")
    assert remove.get_attribute("class") == "secondary"
    with page.expect_navigation():
        remove.click()
    assert page.url.split("?")[0].endswith(f"{PAGE}/remove")  # a GET form: "remove?"
    assert layout_problems(page) == {}
    if kind == "desktop" and lang == "en":
        screenshot(page, "staff-exception-remove")
    with page.expect_navigation():
        page.locator("main form[method=post] button[type=submit]").click()
    assert page.url.endswith(PAGE)
    assert page.locator("[role=alert]").count() == 1
    assert page.locator(f"form[action$='{PAGE}/remove']").count() == 0  # gone


@ON_A_DESKTOP_AND_A_PHONE
def test_account_opens_its_page_and_every_page_has_a_skip_link_and_a_favicon(
    site, open_page, kind, lang
):
    page = open_page(kind)
    favicons = []
    page.on("request", lambda request: "favicon" in request.url and favicons.append(request.url))
    log_in(page, site, "s00")
    page.goto(site.url("/courses/pytorch/"))
    with page.expect_navigation():
        page.locator("nav a[href='/account/']").click()
    assert page.url.endswith("/account/")
    assert page.locator("main h2").count() == 3  # notices, password, tokens
    assert layout_problems(page) == {}
    if kind == "desktop" and lang == "en":
        screenshot(page, "account")
    # the keyboard's first stop is the skip link, shown; it moves the focus to the content
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.className")
    assert focused == "skip-link"
    box = page.locator(".skip-link").bounding_box()
    assert box and box["width"] > 20 and box["height"] > 10 and box["y"] >= 0
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "content"
    # the icon the page names loads; nothing asks for /favicon.ico
    icon = page.request.get(site.url(page.locator("link[rel=icon]").get_attribute("href")))
    assert icon.status == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert not any(url.endswith("/favicon.ico") for url in favicons)
