"""Log-in sessions: ended everywhere by log-out and a new password, a bounded lifetime, cookie
flags, no redirect off the site, and throttled guessing (per account, per address, before any
password is hashed)."""

import re
import time
import uuid
from urllib.parse import quote

import helpers
import pytest
from helpers import change_settings

from server.core.config import app_settings
from server.web.app import create_app


def csrf(client, path="/login") -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text).group(1)


def log_in(client, username="ana", password="long-password", next_=None, address="10.0.0.1"):
    """helpers.log_in from an address (guesses are counted per address too)."""
    path = "/login" + (f"?next={quote(next_, safe='')}" if next_ is not None else "")
    return helpers.log_in(client, username, password, path, environ_base={"REMOTE_ADDR": address})


def logged_in(client) -> bool:
    return client.get("/courses/pytorch/").status_code == 200


def limited(app, **settings):
    """The app with other log-in limits (fresh counts)."""
    from server.web import throttle

    change_settings(app, **settings)
    throttle.init_app(app)
    return app


@pytest.fixture
def hashes(monkeypatch):
    """How many password hashes were checked."""
    from server.core import users

    checked = []
    real = users.check_password_hash
    monkeypatch.setattr(
        users, "check_password_hash", lambda *args: checked.append(1) or real(*args)
    )
    return checked


def test_log_out_ends_a_copied_cookie(course):
    browser, thief = course.test_client(), course.test_client()
    assert log_in(browser).status_code == 302
    thief.set_cookie("session", browser.get_cookie("session").value)
    assert logged_in(browser) and logged_in(thief)
    assert (
        browser.post("/logout", data={"csrf_token": csrf(browser, "/courses/pytorch/")}).status_code
        == 302
    )
    assert not logged_in(thief) and not logged_in(browser)
    assert log_in(browser).status_code == 302 and logged_in(browser)  # a new session works


def test_a_new_password_ends_the_other_sessions(course):
    here, elsewhere = course.test_client(), course.test_client()
    log_in(here), log_in(elsewhere)
    form = {"current": "long-password", "new": "new-password-1", "repeat": "new-password-1"}

    def change(**fields):
        return here.post(
            "/account/password",
            data={**form, **fields, "csrf_token": csrf(here, "/account/password")},
        )

    assert here.post("/account/password", data=form).status_code == 400  # no CSRF token
    wrong = change(current="not-it")
    assert wrong.status_code == 400 and "The current password is wrong" in wrong.text
    assert change(repeat="other").status_code == 400
    assert "at least 8 characters" in change(new="short", repeat="short").text
    assert logged_in(elsewhere)  # nothing changed so far
    assert change().status_code == 303
    assert logged_in(here) and not logged_in(elsewhere)
    assert log_in(elsewhere).status_code == 401
    assert log_in(elsewhere, password="new-password-1").status_code == 302


def test_cookies_are_lax_secure_and_short_lived(course):
    cookie = log_in(course.test_client()).headers["Set-Cookie"]
    assert "; Secure" in cookie and "; HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert course.permanent_session_lifetime.total_seconds() == 12 * 3600 and "Expires=" in cookie


def test_cookie_settings(database_url):
    app = create_app(
        {
            "DATABASE_URL": database_url,
            "SECRET_KEY": "test",
            "SESSION_COOKIE_SECURE": "false",
            "SESSION_COOKIE_SAMESITE": "Strict",
            "SESSION_LIFETIME_HOURS": 2,
            "LOGIN_LIMITS_STORAGE": "memory://",
        }
    )
    assert app.config["SESSION_COOKIE_SECURE"] is False
    assert app.config["SESSION_COOKIE_SAMESITE"] == "Strict"
    assert app.permanent_session_lifetime.total_seconds() == 2 * 3600


@pytest.mark.parametrize("hours_ago, valid", [(11, True), (13, False)])
def test_a_session_ends_its_lifetime_after_its_last_request(course, monkeypatch, hours_ago, valid):
    from server.core.models import User

    now = time.time()
    with course.app_context():
        ana = (
            course.extensions["hpcgrade.db"].sessions().query(User).filter_by(username="ana").one()
        )
        signer = course.session_interface.get_signing_serializer(course)
        with monkeypatch.context() as past:
            past.setattr(time, "time", lambda: now - hours_ago * 3600)
            cookie = signer.dumps({"user_id": ana.id, "version": ana.session_version})
    client = course.test_client()
    client.set_cookie("session", cookie)
    assert logged_in(client) is valid


NASTY_TARGETS = [
    "/\t/evil.example",
    "/\\evil.example",
    "//evil",
    "///evil",
    "https://evil",
    "/\n/evil",
    " //evil",
    "\x01//evil",
    "java\nscript:alert(1)",
    "javascript:alert(1)",
    "http:/evil",
    "\\\\evil",
    "/\r\n/evil",
    "%2F%2Fevil",
    "/\x7f/evil",
]


@pytest.mark.parametrize("target", NASTY_TARGETS)
def test_no_redirect_off_the_site(course, target):
    reply = log_in(course.test_client(), next_=target)
    assert reply.status_code == 302 and reply.headers["Location"] == "/", target


def test_the_issues_redirect_and_a_good_one(course):
    client = course.test_client()
    evil = client.post(
        "/login?next=/%09/evil.example",
        data={"username": "ana", "password": "long-password", "csrf_token": csrf(client)},
    )
    assert evil.headers["Location"] == "/"
    good = log_in(course.test_client(), next_="/courses/pytorch/submissions?lang=es")
    assert good.headers["Location"] == "/courses/pytorch/submissions?lang=es"


def test_failed_log_ins_are_throttled_per_account_before_hashing(course, hashes):
    client = course.test_client()
    for attempt in range(5):  # 5 per minute, from several addresses
        assert log_in(client, password="guess", address=f"10.0.1.{attempt}").status_code == 401
    assert len(hashes) == 5
    refused = log_in(client, address="10.0.2.1")  # the right password, from a new address
    assert refused.status_code == 429 and len(hashes) == 5
    assert 0 < int(refused.headers["Retry-After"]) <= 60
    assert "Too many failed log-ins" in refused.text
    api = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    assert api.status_code == 429 and api.headers["Retry-After"] and "Too many" in api.json["error"]
    assert log_in(client, username="bea").status_code == 302  # another account is not held up


def test_failed_log_ins_are_throttled_per_address(course, hashes):
    client = limited(course, LOGIN_LIMITS_PER_ADDRESS="3 per hour").test_client()
    for name in ("u1", "u2", "u3"):  # unknown users cost a hash check each, as known ones do
        assert log_in(client, username=name, address="10.9.9.9").status_code == 401
    assert len(hashes) == 3
    refused = log_in(client, username="u4", address="10.9.9.9")
    assert refused.status_code == 429 and 3000 < int(refused.headers["Retry-After"]) <= 3600
    assert log_in(client, username="u4", address="10.9.9.10").status_code == 401
    assert len(hashes) == 4


def test_a_locked_account_opens_again_after_its_window(course):
    client = limited(course, LOGIN_LIMITS_PER_ACCOUNT="2 per second").test_client()
    for _ in range(2):
        log_in(client, password="guess")
    assert log_in(client).status_code == 429
    time.sleep(1.1)
    assert log_in(client).status_code == 302 and logged_in(client)


def test_a_success_forgets_the_accounts_failures(course):
    client = course.test_client()
    for _ in range(4):
        log_in(client, password="guess")
    assert log_in(client).status_code == 302
    for _ in range(4):
        assert log_in(client, password="guess").status_code == 401


def test_password_checks_at_once_are_bounded(course, hashes):
    checks = course.extensions["hpcgrade.throttle"].checks
    for _ in range(app_settings(course).password_checks_per_process):
        checks.acquire()  # other requests of this process are checking passwords
    busy = log_in(course.test_client())
    assert busy.status_code == 429 and busy.headers["Retry-After"] == "1" and not hashes
    assert "checking many passwords" in busy.text


def test_a_storage_that_is_away_counts_in_memory(course):
    client = limited(course, LOGIN_LIMITS_STORAGE="redis://127.0.0.1:1/0").test_client()
    for _ in range(5):
        assert log_in(client, username="nobody", password="guess").status_code == 401
    assert log_in(client, username="nobody", password="guess").status_code == 429


def test_a_storage_that_is_not_redis_is_named():
    from server.core.config import ConfigError

    with pytest.raises(ConfigError, match="LOGIN_LIMITS_STORAGE"):
        create_app({"SECRET_KEY": "test", "BROKER_URL": "filesystem://localhost/"})


@pytest.mark.services
def test_failures_are_shared_between_processes_through_redis(database_url):
    settings = {
        "DATABASE_URL": database_url,
        "SECRET_KEY": "test",
        "TESTING": True,
        "LOGIN_LIMITS_STORAGE": "redis://127.0.0.1:6379/14",
        "COURSE": f"test-{uuid.uuid4().hex[:12]}",
    }  # its own keys in the shared Redis
    first, second = create_app(settings).test_client(), create_app(settings).test_client()
    for _ in range(5):
        assert log_in(first, username="nobody", password="guess").status_code == 401
    assert log_in(second, username="nobody", password="guess").status_code == 429


def test_tries_at_once_cannot_pass_the_account_limit_together(course, monkeypatch):
    """Each try takes its room before its password is checked: ten sent while the first are
    still hashing get five checks (5 per minute), not ten."""
    import threading

    from server.web import throttle

    checked = []

    def slow_wrong_password(session, username, password):
        checked.append(username)
        time.sleep(0.2)
        return None

    monkeypatch.setattr(throttle, "authenticate", slow_wrong_password)
    app = limited(course, PASSWORD_CHECKS_PER_PROCESS=20)
    answers = []

    def guess(n):
        with app.test_request_context(environ_base={"REMOTE_ADDR": f"10.0.3.{n}"}):
            try:
                answers.append(throttle.check_password(None, "ana", "guess"))
            except throttle.Throttled:
                answers.append("throttled")

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(checked) == 5 and sorted(answers, key=str) == [None] * 5 + ["throttled"] * 5


def test_a_new_password_revokes_the_users_api_tokens(course):
    """A token outlived the password it was made with: whoever had learnt the old password
    kept the API. The new one revokes every token of the user (not another user's), and says so."""
    api = course.test_client()
    tokens = {
        name: {
            "Authorization": "Bearer "
            + api.post(
                "/api/v1/tokens",
                json={"username": name, "password": "long-password", "label": label},
            ).json["token"]
        }
        for name, label in (("ana", "laptop"), ("bea", "home"))
    }
    second = {
        "Authorization": "Bearer "
        + api.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"}).json[
            "token"
        ]
    }
    here = course.test_client()
    log_in(here)
    changed = here.post(
        "/account/password",
        follow_redirects=True,
        data={
            "current": "long-password",
            "new": "new-password-1",
            "repeat": "new-password-1",
            "csrf_token": csrf(here, "/account/password"),
        },
    )
    for headers in (tokens["ana"], second):
        assert api.get("/api/v1/exercises", headers=headers).status_code == 401
    assert api.get("/api/v1/exercises", headers=tokens["bea"]).status_code == 200
    assert (
        "your 2 API tokens were revoked: log in again with hpcgrade login where you used "
        "them" in changed.text
    )
    assert "your API tokens are revoked" in here.get("/account/password").text
    again = here.post(
        "/account/password",
        follow_redirects=True,
        data={
            "current": "new-password-1",
            "new": "new-password-2",
            "repeat": "new-password-2",
            "csrf_token": csrf(here, "/account/password"),
        },
    )
    assert "Password changed; your other sessions have ended." in again.text
    assert "API token" not in again.text  # none was left
