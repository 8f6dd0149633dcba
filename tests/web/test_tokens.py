"""API tokens: labels, expiry, revocation (the account's page and `hpcgrade tokens`), and a role
or a token that changes applying at once."""

import datetime as dt
import io
import json
import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import REFERENCE_Q, change_settings, log_in, new_course

from server.core.models import ApiToken, Enrolment, User
from worker.cli.main import main


def new_token(client, username="ana", **fields) -> dict:
    reply = client.post(
        "/api/v1/tokens", json={"username": username, "password": "long-password", **fields}
    )
    assert reply.status_code == 201, reply.json
    return {"Authorization": f"Bearer {reply.json['token']}"}


def change(app, statement):
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        session.execute(statement)
        session.commit()


def csrf(client, path) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', client.get(path).text).group(1)


def test_a_token_expires(course):
    client = course.test_client()
    reply = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    expires = dt.datetime.fromisoformat(reply.json["expires_at"])
    lifetime = expires - dt.datetime.now(dt.timezone.utc)
    assert dt.timedelta(days=119) < lifetime <= dt.timedelta(days=120)
    headers = {"Authorization": f"Bearer {reply.json['token']}"}
    assert client.get("/api/v1/exercises", headers=headers).status_code == 200
    change(
        course,
        sa.update(ApiToken).values(
            expires_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
        ),
    )
    expired = client.get("/api/v1/exercises", headers=headers)
    assert expired.status_code == 401
    assert expired.json == {"error": "token expired, run hpcgrade login again"}


def test_token_requests_that_make_no_sense_are_400(course):
    client = course.test_client()
    for body in ([], ["ana", "long-password"], {"username": "ana"}, {"username": 1, "password": 2}):
        reply = client.post("/api/v1/tokens", json=body)
        assert reply.status_code == 400 and "'username' and 'password'" in reply.json["error"], body
    assert (
        client.post("/api/v1/tokens", data="[", content_type="application/json").status_code == 400
    )
    for label in ("x" * 101, "a\nb", 7):
        reply = client.post(
            "/api/v1/tokens", json={"username": "ana", "password": "long-password", "label": label}
        )
        assert reply.status_code == 400 and "label" in reply.json["error"]


def test_a_demoted_instructor_loses_staff_reads_at_once(course):
    """Her role is her enrolment's in the course: changed there, her token reads as it says
    at once (a token holds no role)."""
    from server.core.users import add_user

    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        add_user(session, "ines", "Inés", "i@uni.es", "instructor", "long-password")
        session.commit()
    client = course.test_client()
    created = client.post(
        "/api/v1/submissions",
        headers=new_token(client),
        data={"exercise": "autograd-q", "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    ).json
    staff = new_token(client, "ines")
    assert client.get(created["url"], headers=staff).status_code == 200
    ines = sa.select(User.id).where(User.username == "ines").scalar_subquery()
    for role, status in (("student", 404), ("ta", 200), ("instructor", 200)):
        change(course, sa.update(Enrolment).where(Enrolment.user_id == ines).values(role=role))
        assert client.get(created["url"], headers=staff).status_code == status, role
    change(course, sa.delete(Enrolment).where(Enrolment.user_id == ines))
    assert client.get(created["url"], headers=staff).status_code == 404  # out of the course


def test_the_account_page_lists_and_revokes_ones_own_tokens(course):
    api = course.test_client()
    laptop = new_token(api, label="ana@laptop")
    cluster = new_token(api, label="ana@login1")
    bea = new_token(api, "bea", label="bea@home")
    api.get("/api/v1/exercises", headers=laptop)
    browser = course.test_client()
    log_in(browser)
    page = browser.get("/account/tokens").text
    assert "ana@laptop" in page and "ana@login1" in page and "bea@home" not in page
    assert "never" in page  # ana@login1 was not used yet
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        ids = dict(session.execute(sa.select(ApiToken.label, ApiToken.id)).all())
    token = csrf(browser, "/account/tokens")
    assert browser.post(f"/account/tokens/{ids['ana@laptop']}/revoke").status_code == 400  # CSRF
    assert (
        browser.post(
            f"/account/tokens/{ids['bea@home']}/revoke", data={"csrf_token": token}
        ).status_code
        == 404
    )  # not hers
    assert (
        browser.post(
            f"/account/tokens/{ids['ana@laptop']}/revoke", data={"csrf_token": token}
        ).status_code
        == 303
    )
    assert api.get("/api/v1/exercises", headers=laptop).status_code == 401  # at once
    assert api.get("/api/v1/exercises", headers=cluster).status_code == 200
    assert api.get("/api/v1/exercises", headers=bea).status_code == 200
    assert "ana@laptop" not in browser.get("/account/tokens").text


@pytest.fixture
def cli_database(tmp_path, monkeypatch):
    from server.core.db import Database
    from server.core.tokens import issue
    from server.core.users import add_user

    url = f"sqlite:///{tmp_path / 'cli.sqlite'}"
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", url)
    assert CliRunner().invoke(main, ["db", "upgrade"]).exit_code == 0
    database = Database(url)
    with database.sessions.begin() as session:
        course = new_course(session)
        for name in ("ana", "bea"):
            user = add_user(
                session,
                name,
                name.title(),
                f"{name}@uni.es",
                "student",
                "long-password",
                course=course,
            )
            issue(session, user, f"{name}@laptop", 120)
            issue(session, user, f"{name}@login1", 120)
    yield database
    database.dispose()


def test_cli_lists_and_revokes_tokens(cli_database):
    runner = CliRunner()
    listed = runner.invoke(main, ["tokens", "list"])
    assert listed.exit_code == 0 and listed.output.count("@laptop") == 2
    assert "never" in listed.output
    only_ana = runner.invoke(main, ["tokens", "list", "--user", "ana"]).output
    assert "ana@login1" in only_ana and "bea@" not in only_ana
    with cli_database.sessions() as session:
        ids = dict(session.execute(sa.select(ApiToken.label, ApiToken.id)).all())
    assert (
        runner.invoke(main, ["tokens", "revoke", str(ids["ana@laptop"])]).output
        == "revoked 1 token(s)\n"
    )
    again = runner.invoke(main, ["tokens", "revoke", str(ids["ana@laptop"])])
    assert again.exit_code == 1 and f"no token {ids['ana@laptop']}" in again.output
    for usage in (
        ["tokens", "revoke"],
        ["tokens", "revoke", "--user", "bea"],
        ["tokens", "revoke", "--all"],
        ["tokens", "revoke", "1", "--user", "bea", "--all"],
    ):
        assert runner.invoke(main, usage).exit_code == 2, usage
    assert (
        runner.invoke(main, ["tokens", "revoke", "--user", "bea", "--all"]).output
        == "revoked 2 token(s)\n"
    )
    assert runner.invoke(main, ["tokens", "revoke", "--user", "nobody", "--all"]).exit_code == 1
    with cli_database.sessions() as session:
        assert session.scalars(sa.select(ApiToken.label)).all() == ["ana@login1"]


def test_cli_sets_a_password_and_ends_the_sessions(cli_database):
    from server.core.users import authenticate

    runner = CliRunner()
    short = runner.invoke(main, ["users", "password", "ana", "--password", "short"])
    assert short.exit_code == 1 and "at least 8 characters" in short.output
    assert (
        runner.invoke(main, ["users", "password", "nobody", "--password", "x" * 9]).exit_code == 1
    )
    done = runner.invoke(
        main, ["users", "password", "ana"], input="new-password-1\nnew-password-1\n"
    )
    assert done.exit_code == 0, done.output
    assert "its sessions have ended and its 2 API token(s) were revoked" in done.output
    with cli_database.sessions() as session:
        assert authenticate(session, "ana", "new-password-1").session_version == 1
        assert authenticate(session, "ana", "long-password") is None
        assert session.scalars(sa.select(ApiToken.label)).all() == ["bea@laptop", "bea@login1"]


def test_hpcgrade_login_sends_a_label(monkeypatch, tmp_path):
    from hpcgrade.service import Service

    sent = {}

    def answer(self, method, path, params, body=None, headers=None, retries=None):
        if path != "/api/v1/tokens":  # the courses it lists once logged in
            return {"courses": []}
        sent.update(json.loads(body))
        return {"token": "t", "username": "ana", "expires_at": "2030-01-01T00:00:00+00:00"}

    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "client.toml"))
    monkeypatch.setattr(Service, "request", answer)
    result = CliRunner().invoke(
        main, ["login", "--server", "http://x", "--username", "ana", "--password", "p"]
    )
    assert result.exit_code == 0, result.output
    assert re.fullmatch(r".+@.+", sent["label"]) and "2030-01-01" in result.output


def test_the_api_and_a_bad_label_speak_the_readers_language(course):
    client = course.test_client()
    label = client.post(
        "/api/v1/tokens?lang=es",
        json={"username": "ana", "password": "long-password", "label": "a\x1b[2Jb"},
    )
    assert label.status_code == 400
    assert label.json == {
        "error": "la etiqueta debe ser un texto de hasta 100 caracteres imprimibles"
    }
    headers = new_token(client)
    fields = client.post("/api/v1/submissions?lang=es", headers=headers, data={"file": "x"})
    assert fields.json == {"error": "envía los campos multipart 'exercise' y 'file'"}
    missing = client.get("/api/v1/submissions/999999?lang=es", headers=headers)
    assert missing.status_code == 404 and missing.json == {"error": "no existe esa entrega"}


def test_the_token_page_shows_times_in_the_courses_time_zone(course):
    change_settings(course, TIMEZONE="Europe/Madrid")
    new_token(course.test_client(), label="laptop")
    change(
        course,
        sa.update(ApiToken).values(
            created_at=dt.datetime(2026, 11, 23, 17, 0, tzinfo=dt.timezone.utc),
            last_used_at=dt.datetime(2026, 11, 24, 8, 30, tzinfo=dt.timezone.utc),
            expires_at=dt.datetime(2027, 3, 23, 23, 30, tzinfo=dt.timezone.utc),
        ),
    )
    browser = course.test_client()
    log_in(browser)
    page = browser.get("/account/tokens").text
    assert "23 Nov 2026, 18:00" in page and "24 Nov 2026, 09:30" in page
    assert "24 Mar 2027, 00:30" in page  # the next day in Madrid
    assert "UTC" not in page


def test_a_token_made_on_the_page_works_once_shown_and_never_cached(course):
    """For an account with no password to give `hpcgrade login` (single sign-on's)."""
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.add(
            User(
                username="sso",
                name="Sso",
                email="s@uni.es",
                password_hash="!no-password",
                auth_source="oidc",
            )
        )
        session.commit()
        user_id = session.scalar(sa.select(User.id).where(User.username == "sso"))
    client = course.test_client()
    with client.session_transaction() as cookie:
        cookie.update(user_id=user_id, version=0)
    made = client.post(
        "/account/tokens", data={"csrf_token": csrf(client, "/account/tokens"), "label": "laptop"}
    )
    assert made.status_code == 201 and made.headers["Cache-Control"] == "no-store"
    token = re.search(r"export HPCGRADE_TOKEN=([\w-]+)", made.text).group(1)
    assert "export HPCGRADE_SERVER=http://localhost" in made.text
    courses = client.get("/api/v1/courses", headers={"Authorization": f"Bearer {token}"})
    assert courses.status_code == 200
    listed = client.get("/account/tokens").text
    assert "laptop" in listed and token not in listed
    assert client.post("/account/tokens", data={"label": "x"}).status_code == 400  # no CSRF
    bad = client.post(
        "/account/tokens",
        data={"csrf_token": csrf(client, "/account/tokens"), "label": "x" * 101},
        follow_redirects=True,
    )
    assert "up to 100 printable characters" in bad.text
