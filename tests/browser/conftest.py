"""The fixtures of the -m browser tests, which this folder holds (their helpers are in
browser.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser import CHROMIUM, LOCALES, VIEWPORTS, PageWatch, running_site


def _missing(reason: str, promised: bool) -> None:
    if promised:  # scripts/test ran scripts/browser: the browser tests must run, not skip
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium, headless, driven by Playwright (never Playwright's own download)."""
    promised = os.environ.get("HPCGRADE_CHROMIUM")
    executable = promised or CHROMIUM
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("playwright is not installed: .venv/bin/pip install -e '.[test]'", bool(promised))
    if not Path(executable).exists():
        _missing(f"no Chromium at {executable}: scripts/browser installs Debian's", bool(promised))
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=executable, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="session")
def site(browser):
    """The whole service behind nginx (browser.Site); it starts only once a browser is there to
    use it. Student accounts s00…s03 and the instructor `prof`."""
    with running_site() as started:
        yield started


@pytest.fixture
def lang() -> str:
    """The browser's language (Accept-Language); a test asks for another one with
    @pytest.mark.parametrize("lang", ["es"])."""
    return "en"


@pytest.fixture
def open_page(browser, lang):
    """open_page("desktop" | "phone"): a new page, in a browser context of its own (its own
    cookies). The test fails at teardown if the browser complained of anything on any page it
    opened: a console error, a script error, a CSP violation, a load that failed."""
    opened: list[tuple[object, PageWatch]] = []

    def open_(kind: str):
        context = browser.new_context(locale=LOCALES[lang], **VIEWPORTS[kind])
        page = context.new_page()
        watch = PageWatch()
        watch.attach(page)
        opened.append((context, watch))
        return page

    yield open_
    problems = []
    for context, watch in opened:
        context.close()
        problems += watch.problems()
    assert not problems, "the browser complained:\n" + "\n".join(problems)


@pytest.fixture
def desktop(open_page):
    """A page 1366×900 wide."""
    return open_page("desktop")


@pytest.fixture
def phone(open_page):
    """A page on a phone: 390×844, touch, twice as many pixels."""
    return open_page("phone")
