"""A real browser on the whole service, for the -m browser tests (fixtures: conftest.py).

Debian's Chromium, driven by Playwright, reaches the portal through nginx on a `stack.Stack`
(its own PostgreSQL and Redis, gunicorn, a Celery worker and beat), as a student's browser reaches
a deployment. The helpers here log in, read the live status, run axe-core, look for pages wider
than the screen and keep screenshots for the docs; `PageWatch` records what the browser
complains of (console errors, script errors, Content-Security-Policy violations, failed loads).
"""

from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

import pytest

if TYPE_CHECKING:  # imported when a service starts, not whenever this folder is collected
    from stack import Stack

ROOT = Path(__file__).resolve().parents[2]
AXE = Path(__file__).resolve().parent / "vendor" / "axe.min.js"
# the docs' pictures are refreshed with HPCGRADE_SCREENSHOTS=docs/screenshots; other runs keep
# theirs out of the checkout
SCREENSHOTS = Path(
    os.environ.get("HPCGRADE_SCREENSHOTS") or Path(tempfile.gettempdir()) / "hpcgrade-screenshots"
)
CHROMIUM = "/usr/bin/chromium"  # Debian's package (scripts/browser installs it)
VIEWPORTS = {
    "desktop": {"viewport": {"width": 1366, "height": 900}},
    "phone": {
        "viewport": {"width": 390, "height": 844},
        "is_mobile": True,
        "has_touch": True,
        "device_scale_factor": 2,
    },
}
# the browser's language, which the portal reads from Accept-Language when neither ?lang= nor
# the session chose one
LOCALES = {"en": "en-GB", "es": "es-ES"}
# a flow's two runs: on a desktop in English, and on a phone in Spanish, whose longer words on
# the narrowest screen are where a page's layout gives first. Each width and each language is met
# by every flow; the other two pairings cost CI a third of its browser time (tests/README.md)
ON_A_DESKTOP_AND_A_PHONE = pytest.mark.parametrize(
    ("kind", "lang"), [("desktop", "en"), ("phone", "es")]
)
INSTRUCTOR = ("prof", "prof-long-password")
FINAL_STATES = ("graded", "grader error", "cancelled")


# the exercise form's Submit, not its Check (a second submit button, with a formaction of its own)
SUBMIT = "button[type=submit]:not([formaction])"


@dataclass
class Site:
    """The portal as its users see it: its address (nginx's), and who may log in."""

    stack: Stack
    students: dict[str, str]  # username → password
    instructor: tuple[str, str] = INSTRUCTOR

    @property
    def base(self) -> str:
        return self.stack.base

    def url(self, path: str) -> str:
        return self.base + path

    def password(self, username: str) -> str:
        return {**self.students, self.instructor[0]: self.instructor[1]}[username]

    def database(self):
        """A Database on the service's PostgreSQL (dispose it after use)."""
        return self.stack.database()


@contextmanager
def running_site(students: int = 4) -> Iterator[Site]:
    """The whole service, with `students` student accounts, each in both courses (stack.COURSES),
    and one instructor of the first, `prof`."""
    from stack import COURSES, Stack

    with Stack(students=students) as stack:
        username, password = INSTRUCTOR
        stack.hpcgrade(
            "users",
            "add",
            username,
            "--name",
            "Pilar Prof",
            "--email",
            "prof@uni.example",
            "--role",
            "instructor",
            "--course",
            COURSES[0],
            "--password",
            password,
        )
        yield Site(stack, dict(stack.passwords))


# --- what the browser complains of -------------------------------------------------------------


@dataclass
class PageWatch:
    """Everything a page's console or network says went wrong. A Content-Security-Policy
    violation is a bug too: the policy forbids inline scripts and styles, and a page that relies
    on one is broken for its users (Chromium reports each violation as a console error)."""

    console: list[tuple[str, str]] = field(default_factory=list)  # (text, url)
    script_errors: list[str] = field(default_factory=list)
    failed_loads: list[str] = field(default_factory=list)
    pages: set[str] = field(default_factory=set)  # the documents navigated to

    def attach(self, page) -> None:
        page.on(
            "console",
            lambda message: (
                message.type == "error"
                and self.console.append((message.text, message.location.get("url", "")))
            ),
        )
        page.on("pageerror", lambda error: self.script_errors.append(str(error)))
        page.on("response", self._response)
        page.on("requestfailed", self._request_failed)

    def _response(self, response) -> None:
        if response.request.is_navigation_request():
            self.pages.add(response.url)  # its status is the test's business, not an error here
        elif response.status >= 400:
            self.failed_loads.append(f"{response.status} {response.url}")

    def _request_failed(self, request) -> None:
        # a poll cut short by the page's own reload or by closing the page is no failure
        if request.failure != "net::ERR_ABORTED":
            self.failed_loads.append(f"{request.failure} {request.url}")

    def problems(self) -> list[str]:
        found = [f"script error: {error}" for error in self.script_errors]
        found += [f"failed load: {load}" for load in self.failed_loads]
        for text, url in self.console:
            if text.startswith("Failed to load resource") and (
                url in self.pages
                or url.endswith("/favicon.ico")
                or any(url in load for load in self.failed_loads)
            ):
                continue  # a document's own status, the browser's favicon probe, or told above
            kind = "CSP violation" if "Content Security Policy" in text else "console error"
            found.append(f"{kind} on {url or 'the page'}: {text}")
        return found


# --- what a user does --------------------------------------------------------------------------


def log_in(page, site: Site, username: str, password: str | None = None) -> None:
    """Through the log-in page, as a user does; fails with the page's message if refused."""
    page.goto(site.url("/login"))
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password or site.password(username))
    with page.expect_navigation():
        page.locator("form:has(input[name=password]) [type=submit]").click()
    if "/login" in page.url:
        flashed = page.locator("[role=alert]").all_text_contents()
        raise AssertionError(f"log-in of {username} refused: {flashed or page.url}")


def live_states(page, seconds: float = 90) -> list[str]:
    """The texts that the live region (#live) of a submission page shows, in order, each once,
    until it says that grading ended (English labels), or `seconds` pass. Read every 0.1 s: the
    page changes the region at most once a second."""
    from playwright.sync_api import Error as BrowserError

    seen: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            text = " ".join((page.locator("#live").text_content(timeout=1000) or "").split())
        except BrowserError:  # the page reloads itself once grading ends: read it again
            text = ""
        if text and (not seen or seen[-1] != text):
            seen.append(text)
            if text.lower().startswith(FINAL_STATES):
                break
        page.wait_for_timeout(100)
    return seen


# --- what the tests check ----------------------------------------------------------------------


def axe_violations(page) -> list[dict]:
    """axe-core's WCAG 2 A and AA violations on the page as it is now: id, impact, help and the
    targets (CSS selectors) of the nodes at fault.

    axe is evaluated through Playwright (the DevTools protocol), which the page's CSP does not
    govern: `page.add_script_tag` would insert an inline <script>, which the portal's policy
    (default-src 'self') blocks, and `bypass_csp=True` would also hide the violations that
    `PageWatch` must see. axe itself needs no eval, so the page runs it under its own policy."""
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(AXE.read_text())
    found = page.evaluate("""() => axe.run(document, {
        runOnly: {type: "tag", values: ["wcag2a", "wcag2aa"]}, resultTypes: ["violations"]})
        .then(r => r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                            targets: v.nodes.map(n => n.target.join(" "))})))""")
    return found


def overflows(page) -> list[str]:
    """Why the page is wider than the window, or [] when it fits: first the page's and the
    window's widths, then each element that sticks out past the right edge and whose parent
    does not (the culprit, not its ancestors), outside boxes that scroll or clip their content.

    The window's width is the root's clientWidth, the layout viewport without a scroll bar:
    innerWidth counts the scroll bar on a desktop, and on a phone grows as the browser zooms out
    to show a page that is too wide."""
    return page.evaluate("""() => {
        const root = document.documentElement, width = root.clientWidth;
        if (root.scrollWidth <= width) { return []; }
        const clips = el => ["auto", "scroll", "hidden", "clip"]
            .includes(getComputedStyle(el).overflowX);
        const sticksOut = el => el.getBoundingClientRect().right > width + 0.5;
        const clipped = el => { for (let p = el.parentElement; p && p !== root; p = p.parentElement)
            { if (clips(p)) { return true; } } return false; };
        const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
            [...el.classList].map(c => "." + c).join("");
        const path = el => { const parts = []; for (let e = el; e && e !== root; e = e.parentElement)
            { parts.unshift(name(e)); } return parts.join(" > "); };
        const culprits = [...document.body.querySelectorAll("*")].filter(el =>
            sticksOut(el) && !clipped(el) && !(el.parentElement && sticksOut(el.parentElement)));
        return [`page ${root.scrollWidth}px wide in a ${width}px window`,
                ...culprits.map(el => `${path(el)}: ${Math.round(el.getBoundingClientRect().width)}px` +
                                      ` wide, right edge at ${Math.round(el.getBoundingClientRect().right)}px`)];
    }""")


def screenshot(page, name: str) -> Path:
    """The whole page, as NAME.png under SCREENSHOTS (docs/using.md shows some of these)."""
    path = SCREENSHOTS / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), full_page=True)
    return path


def layout_problems(page, axe: bool = True) -> dict[str, list]:
    """What is wrong with the page as shown: its overflow (overflows) and, unless `axe` is
    False, axe's violations (axe_violations), each under its name when there is any; {} for a
    page that is right."""
    found = {"overflow": overflows(page), "axe": axe_violations(page) if axe else []}
    return {kind: problems for kind, problems in found.items() if problems}


def walk(
    page, site: Site, pages: dict[str, str], lang: str, axe: bool = True, **values
) -> dict[str, dict]:
    """Each of `pages` (name → path, formatted with `values`) in turn, checked to be in `lang`:
    what is wrong with each (layout_problems), by name; {} when every page is right."""
    found = {}
    for name, path in pages.items():
        page.goto(site.url(path.format(**values)))
        assert page.locator("html").get_attribute("lang") == lang, f"{name}: not in {lang}"
        if problems := layout_problems(page, axe):
            found[name] = problems
    return found
