"""Log-in through the centre's OpenID Connect provider (server/web/oidc_login.py), against a real
one: scripts/oidc's oidc-provider (tests/oidc/provider.mjs). hpcgrade runs in a test client, the
person's browser at the provider is a requests session: the provider's form is posted and its
redirects followed until one leads back to hpcgrade's callback."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import oidc_provider
import pytest
import requests
from helpers import CSRF_TOKEN, change_settings, free_port, log_in, new_course
from oidc_provider import new_person, put_person, sign_in
from sqlalchemy import select

from server.core.config import ConfigError, load_settings
from server.core.models import Course, Enrolment, User

GROUPS = {"student": ["pytorch-students"], "ta": ["pytorch-staff"]}
LAB_GROUPS = {"student": ["lab-students"], "instructor": ["lab-staff"]}
NEXT = "/courses/pytorch/"
WITH_PROVIDER = {
    "OIDC_ISSUER": "http://127.0.0.1:9400",
    "OIDC_CLIENT_ID": "hpcgrade",
    "OIDC_CLIENT_SECRET": "secret",
}


@pytest.fixture
def sso_app(course):
    """The app with its course (local students ana and bea) mapping the provider's groups to
    roles, a second course with groups of its own, and the provider configured."""
    oidc_provider.require()
    change_settings(course, **oidc_provider.settings())
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        session.scalar(select(Course).where(Course.slug == "pytorch")).directory_groups = GROUPS
        new_course(session, "lab", directory_groups=LAB_GROUPS)
        session.commit()
    return course


def start(client, next_page: str | None = None):
    """GET /login/oidc: hpcgrade's redirect to the provider. hpcgrade is reached as
    http://127.0.0.1, so that its redirect URI is a loopback one the provider takes."""
    answer = client.get("http://127.0.0.1/login/oidc" + (f"?next={next_page}" if next_page else ""))
    assert answer.status_code == 302, answer.text
    return answer.location


def to_callback(
    client, person: dict, next_page: str | None = None, provider: requests.Session | None = None
) -> str:
    """The URL the provider sends the browser back to, code and state in it."""
    answer = sign_in(
        provider or requests.Session(),
        start(client, next_page),
        person["login"],
        person["password"],
    )
    assert answer.is_redirect, answer.text
    return answer.headers["Location"]


def oidc_log_in(client, person: dict, next_page: str | None = None):
    return client.get(to_callback(client, person, next_page))


def account(app, username: str) -> User | None:
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        return session.scalar(select(User).where(User.username == username))


def roles(app, username: str) -> dict[str, tuple[str, bool]]:
    """The user's courses: slug → (role, from_directory)."""
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        rows = session.execute(
            select(Course.slug, Enrolment.role, Enrolment.from_directory)
            .join(Enrolment.course)
            .join(Enrolment.user)
            .where(User.username == username)
        )
        return {slug: (role, from_directory) for slug, role, from_directory in rows}


def shows(answer, text: str) -> bool:
    return text in answer.get_data(as_text=True).replace("&#39;", "'")


# --- settings (no provider needed) ----------------------------------------------------------


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {**WITH_PROVIDER, "OIDC_ISSUER": "http://sso.uni.example/realms/uni"},
            "must be an https address",
        ),
        ({"OIDC_ISSUER": "https://sso.uni.example"}, "set OIDC_CLIENT_ID and OIDC_CLIENT_SECRET"),
        ({"OIDC_CLIENT_ID": "hpcgrade"}, "set OIDC_ISSUER too"),
        ({**WITH_PROVIDER, "OIDC_SCOPES": ["profile"]}, "must include openid"),
    ],
)
def test_wrong_single_sign_on_settings_stop_start_up(settings, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(settings)


def test_the_log_in_page_offers_the_provider_only_where_one_is_configured(app):
    assert not shows(app.test_client().get("/login"), "/login/oidc")
    assert app.test_client().get("/login/oidc").status_code == 404
    change_settings(app, **WITH_PROVIDER, OIDC_LABEL="UCM account")
    page = app.test_client().get("/login?next=/courses/pytorch/")
    assert shows(page, "Log in with UCM account") and shows(page, f"/login/oidc?next={NEXT}")
    assert shows(page, 'name="password"')  # local accounts (guests, admins) still log in


# --- the code flow against the provider -----------------------------------------------------


@pytest.mark.services
def test_a_person_logs_in_through_the_provider_and_lands_where_they_were_going(sso_app):
    person = new_person(groups=["pytorch-students"])
    client = sso_app.test_client()
    answer = oidc_log_in(client, person, next_page="/courses/pytorch/")
    assert answer.status_code == 302 and answer.location == "/courses/pytorch/"
    page = client.get("http://127.0.0.1/courses/pytorch/")
    assert page.status_code == 200 and shows(page, person["claims"]["name"])
    user = account(sso_app, person["login"])
    assert (user.auth_source, user.name, user.email) == (
        "oidc",
        person["claims"]["name"],
        person["claims"]["email"],
    )
    # no given_name or family_name claim: the name split
    assert (user.given_name, user.family_name) == ("Person", person["login"])
    parted = new_person(
        name="Ana María de la Fuente", given_name="Ana María", family_name="de la Fuente"
    )
    oidc_log_in(sso_app.test_client(), parted)
    ana = account(sso_app, parted["login"])
    assert (ana.name, ana.given_name, ana.family_name) == (
        "Ana María de la Fuente",
        "Ana María",
        "de la Fuente",
    )
    # logging out ends hpcgrade's session (the provider's is the centre's to end)
    client.post(
        "http://127.0.0.1/logout", data={"csrf_token": CSRF_TOKEN.search(page.text).group(1)}
    )
    assert client.get("http://127.0.0.1/courses/pytorch/").status_code == 302


@pytest.mark.services
def test_pkce_is_sent_and_the_provider_requires_it(sso_app):
    client = sso_app.test_client()
    query = parse_qs(urlsplit(start(client)).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["state"] and query["nonce"]
    # the same request without the challenge is refused
    del query["code_challenge"], query["code_challenge_method"]
    refused = requests.get(
        f"{oidc_provider.ISSUER}/auth", params=query, allow_redirects=False, timeout=10
    )
    assert (
        "requires PKCE"
        in parse_qs(urlsplit(refused.headers["Location"]).query)["error_description"][0]
    )
    # a code caught on its way back is worth nothing without the verifier in hpcgrade's session
    callback = to_callback(client, new_person())
    stolen = requests.post(
        f"{oidc_provider.ISSUER}/token",
        timeout=10,
        data={
            "grant_type": "authorization_code",
            "code": parse_qs(urlsplit(callback).query)["code"][0],
            "redirect_uri": "http://127.0.0.1/login/oidc/callback",
        },
        auth=(oidc_provider.CLIENT_ID, oidc_provider.CLIENT_SECRET),
    )
    assert stolen.status_code == 400 and stolen.json()["error"] == "invalid_grant"


@pytest.mark.services
def test_a_tampered_state_is_refused(sso_app):
    person = new_person()
    client = sso_app.test_client()
    callback = to_callback(client, person)
    state = parse_qs(urlsplit(callback).query)["state"][0]
    answer = client.get(callback.replace(f"state={state}", f"state={state[::-1]}x"))
    assert answer.status_code == 400 and shows(answer, "expired or was already used")
    assert account(sso_app, person["login"]) is None
    assert client.get("http://127.0.0.1/courses/pytorch/").status_code == 302


@pytest.mark.services
def test_a_replayed_code_is_refused(sso_app):
    person = new_person()
    first = sso_app.test_client()
    callback = to_callback(first, person)
    assert first.get(callback).status_code == 302
    assert first.get(callback).status_code == 400  # its state was used up
    # another browser, with a state of its own, brings the code: the provider refuses it
    other = sso_app.test_client()
    own_state = parse_qs(urlsplit(start(other)).query)["state"][0]
    code = parse_qs(urlsplit(callback).query)["code"][0]
    answer = other.get(f"http://127.0.0.1/login/oidc/callback?code={code}&state={own_state}")
    assert answer.status_code == 400 and shows(answer, "did not confirm this log-in")
    assert other.get("http://127.0.0.1/courses/pytorch/").status_code == 302


@pytest.mark.services
def test_a_wrong_password_stays_at_the_provider_and_a_cancel_is_refused_here(sso_app):
    person = new_person()
    client, provider = sso_app.test_client(), requests.Session()
    answer = sign_in(provider, start(client), person["login"], "not-the-password")
    assert answer.status_code == 401 and "Wrong username or password." in answer.text
    assert account(sso_app, person["login"]) is None
    cancelled = sign_in(provider, start(client), person["login"], "", cancel=True)
    answer = client.get(cancelled.headers["Location"])
    assert answer.status_code == 403 and shows(answer, "cancelled at the single sign-on")
    assert account(sso_app, person["login"]) is None


@pytest.mark.services
def test_groups_enrol_per_course_with_the_highest_role_and_later_log_ins_follow_them(sso_app):
    person = new_person(groups=["pytorch-students", "pytorch-staff", "lab-students", "other"])
    provider = requests.Session()
    client = sso_app.test_client()
    assert client.get(to_callback(client, person, provider=provider)).status_code == 302
    assert roles(sso_app, person["login"]) == {"pytorch": ("ta", True), "lab": ("student", True)}
    put_person(
        person["login"], {**person, "claims": {**person["claims"], "groups": ["pytorch-students"]}}
    )
    # signed in at the provider already: back at once, with the groups as they are now
    client = sso_app.test_client()
    assert client.get(to_callback(client, person, provider=provider)).status_code == 302
    assert roles(sso_app, person["login"]) == {"pytorch": ("student", True)}


@pytest.mark.services
def test_a_local_account_of_the_same_username_is_refused_and_untouched(sso_app):
    before = account(sso_app, "ana")
    person = new_person(username="ana")
    client = sso_app.test_client()
    answer = oidc_log_in(client, person)
    assert answer.status_code == 403 and shows(answer, "the account ana here is another person's")
    after = account(sso_app, "ana")
    assert (after.auth_source, after.name, after.email, after.password_hash) == (
        "local",
        before.name,
        before.email,
        before.password_hash,
    )
    assert client.get("http://127.0.0.1/courses/pytorch/").status_code == 302
    assert log_in(sso_app.test_client()).status_code == 302  # her own password still works


@pytest.mark.services
def test_a_username_the_provider_gives_to_someone_else_later_is_not_their_account(sso_app):
    """Usernames at a provider change and come back (a renamed or reissued UPN); the `sub` is
    the person. The directory's account of the same person may log in either way."""
    first = new_person(username="reused")
    assert oidc_log_in(sso_app.test_client(), first).status_code == 302
    assert account(sso_app, "reused").subject == first["login"]
    later = new_person(username="reused")
    answer = oidc_log_in(sso_app.test_client(), later)
    assert answer.status_code == 403 and shows(
        answer, "the account reused here is another person's"
    )
    with sso_app.app_context():
        session = sso_app.extensions["hpcgrade.db"].sessions()
        session.add(
            User(
                username="dirk",
                name="Dirk",
                email="d@uni.es",
                password_hash="!",
                auth_source="ldap",
            )
        )
        session.commit()
    directory_person = new_person(username="dirk")
    assert oidc_log_in(sso_app.test_client(), directory_person).status_code == 302
    dirk = account(sso_app, "dirk")
    assert (dirk.auth_source, dirk.subject) == ("ldap", directory_person["login"])


@pytest.mark.services
def test_a_person_without_the_username_claim_is_refused(sso_app):
    answer = oidc_log_in(sso_app.test_client(), new_person(username=None))
    assert answer.status_code == 403 and shows(answer, "did not say your username")


@pytest.mark.services
def test_a_provider_that_is_down_is_a_503_on_the_log_in_page(sso_app):
    change_settings(sso_app, OIDC_ISSUER=f"http://127.0.0.1:{free_port()}")
    answer = sso_app.test_client().get("/login/oidc?next=/courses/pytorch/")
    assert answer.status_code == 503 and shows(answer, "cannot be reached just now")
    assert shows(answer, 'name="password"') and shows(answer, f"/login/oidc?next={NEXT}")
