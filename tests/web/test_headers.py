"""Security headers on every response, and pages that need no inline script or style (so that the
Content-Security-Policy can forbid them)."""

import io
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import REFERENCE_Q, log_in

from server.core.users import add_user

EXPECTED = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
POLICY = [
    "default-src 'self'",
    "frame-ancestors 'none'",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
]
WEB = Path(__file__).parents[2] / "server" / "web"
STATIC = WEB / "static"


class InlineCode(HTMLParser):
    """What a CSP without 'unsafe-inline' would block: inline scripts and styles, style and
    event-handler attributes, javascript: links."""

    def __init__(self):
        super().__init__()
        self.found, self.in_script = [], False

    def handle_starttag(self, tag, attrs):
        if tag == "style":
            self.found.append("<style>")
        self.in_script = tag == "script"
        if tag == "script" and not dict(attrs).get("src"):
            self.found.append("inline <script>")
        for name, value in attrs:
            if name == "style" or name.startswith("on") or (value or "").startswith("javascript:"):
                self.found.append(f"<{tag} {name}=...>")

    def handle_endtag(self, tag):
        self.in_script = False

    def handle_data(self, data):
        if self.in_script and data.strip():
            self.found.append("script body")


def inline_code(html: str) -> list[str]:
    parser = InlineCode()
    parser.feed(html)
    return parser.found


def assert_secured(reply):
    for name, value in EXPECTED.items():
        assert reply.headers.get(name) == value, (reply.request.path, name)
    policy = reply.headers["Content-Security-Policy"]
    assert [p.strip() for p in policy.split(";")] == POLICY and "unsafe-inline" not in policy


def csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


@pytest.fixture
def staff(course):
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    client = course.test_client()
    log_in(client, "prof")
    return client


def test_every_page_has_the_headers_and_no_inline_code(course, staff):
    anonymous = course.test_client()
    login = anonymous.get("/login")
    sent = staff.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={
            "csrf_token": csrf(staff.get("/courses/pytorch/exercises/autograd-q").text),
            "code": REFERENCE_Q,
        },
    )
    waiting = staff.get(sent.headers["Location"])
    assert 'data-waiting="yes"' in waiting.text and "/static/submission.js" in waiting.text
    pages = [login, waiting, anonymous.get("/courses/pytorch/"), anonymous.get("/no-such-page")] + [
        staff.get(path)
        for path in (
            "/",
            "/courses/pytorch/exercises/autograd-q",
            "/courses/pytorch/submissions",
            "/courses/pytorch/staff/",
            "/courses/pytorch/staff/exercises/autograd-q",
            "/courses/pytorch/staff/students/prof",
            "/courses/pytorch/staff/grades",
            "/nothing-here",
            "/courses/pytorch/staff/students/nobody",
        )
    ]
    for reply in pages:
        assert_secured(reply)
        if reply.mimetype == "text/html":
            assert inline_code(reply.text) == [], reply.request.path


def test_json_files_and_downloads_have_the_headers_too(course, staff):
    api = course.test_client()
    token = api.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"}).json
    headers = {"Authorization": f"Bearer {token['token']}"}
    created = api.post(
        "/api/v1/submissions",
        headers=headers,
        data={"exercise": "autograd-q", "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    for reply in [
        created,
        api.get(created.json["url"], headers=headers),
        api.get("/api/v1/exercises"),
        staff.get("/courses/pytorch/staff/grades.csv"),
        staff.get("/static/hpcgrade.css"),
        staff.get("/static/submission.js"),
    ]:
        assert_secured(reply)


def test_the_status_script_is_a_file_that_writes_text_only():
    script = (STATIC / "submission.js").read_text()
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script
    assert "note.textContent" in script  # the server's note on why it waits, as text


def test_the_waiting_page_has_a_live_region_for_the_state(course, staff):
    sent = staff.post(
        "/courses/pytorch/exercises/autograd-q/submissions?lang=es",
        data={
            "csrf_token": csrf(staff.get("/courses/pytorch/exercises/autograd-q").text),
            "code": REFERENCE_Q,
        },
    )
    page = staff.get(sent.headers["Location"]).text
    assert re.search(r'id="live" role="status" aria-live="polite"', page)
    assert 'id="wait-note"' in page and 'data-label-running="corrigiendo"' in page


def test_templates_have_no_inline_code():
    templates = sorted((WEB / "templates").rglob("*.html"))
    assert templates  # a folder that moved away would pass with nothing read
    for path in templates:
        text = path.read_text()
        assert not re.search(r"<script(?![^>]*\bsrc=)|<style|\sstyle=|\son[a-z]+=", text), path
