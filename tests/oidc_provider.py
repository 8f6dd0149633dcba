"""The tests' side of the OpenID Connect provider that scripts/oidc runs (tests/oidc/provider.mjs):
where it is, hpcgrade's settings for it, people of a test's own, and a log-in through it the way
a browser goes (the provider's form posted, its redirects followed until one leads back)."""

from __future__ import annotations

import os
import re
import uuid
from urllib.parse import urljoin

import pytest
import requests

ISSUER = os.environ.get("HPCGRADE_TEST_OIDC_ISSUER")
CLIENT_ID = os.environ.get("HPCGRADE_TEST_OIDC_CLIENT_ID", "hpcgrade")
CLIENT_SECRET = os.environ.get("HPCGRADE_TEST_OIDC_CLIENT_SECRET", "hpcgrade-test-secret")
SCOPES = ["openid", "profile", "email", "groups"]
LOGIN_FORM = re.compile(r'action="(/interaction/[^"]+/login)"')
CANCEL_FORM = re.compile(r'action="(/interaction/[^"]+/abort)"')


def settings() -> dict:
    """hpcgrade's settings for the provider; none where it does not run."""
    if not ISSUER:
        return {}
    return {
        "OIDC_ISSUER": ISSUER,
        "OIDC_CLIENT_ID": CLIENT_ID,
        "OIDC_CLIENT_SECRET": CLIENT_SECRET,
        "OIDC_SCOPES": SCOPES,
    }


def require() -> str:
    """The issuer; the test skips where scripts/oidc did not run, and fails in CI, where it
    must have."""
    if not ISSUER:
        reason = 'HPCGRADE_TEST_OIDC_ISSUER is not set: run `eval "$(scripts/oidc)"`'
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return ISSUER


def new_person(groups=("pytorch-students",), username: str | None = "", **claims) -> dict:
    """A person of this test's own at the provider: their `login` and `password` there, and the
    claims it gives out (username=None: no preferred_username claim)."""
    login = f"p{uuid.uuid4().hex[:10]}"
    person = {
        "password": f"{login}-password",
        "claims": {
            "preferred_username": username or login,
            "name": f"Person {login}",
            "email": f"{login}@uni.example",
            "groups": list(groups),
            **claims,
        },
    }
    if username is None:
        del person["claims"]["preferred_username"]
    put_person(login, person)
    return {"login": login, **person}


def put_person(login: str, person: dict) -> None:
    answer = requests.put(
        f"{ISSUER}/test-accounts/{login}",
        json=person,
        timeout=10,
        headers={"Authorization": f"Bearer {CLIENT_SECRET}"},
    )
    assert answer.status_code == 204, answer.text


def sign_in(
    provider: requests.Session, authorize_url: str, login: str, password: str, cancel: bool = False
) -> requests.Response:
    """At the provider, from hpcgrade's redirect: its form filled in (or cancelled), its
    redirects followed; the answer that leaves it (a redirect to hpcgrade) or its page. A
    person signed in there already goes straight back, as single sign-on does."""
    page = follow_at_provider(
        provider, provider.get(authorize_url, allow_redirects=False, timeout=10)
    )
    if page.is_redirect:
        return page
    if cancel:
        answer = provider.post(
            urljoin(ISSUER, CANCEL_FORM.search(page.text).group(1)),
            allow_redirects=False,
            timeout=10,
        )
    else:
        answer = provider.post(
            urljoin(ISSUER, LOGIN_FORM.search(page.text).group(1)),
            data={"username": login, "password": password},
            allow_redirects=False,
            timeout=10,
        )
    return follow_at_provider(provider, answer)


def follow_at_provider(provider: requests.Session, answer: requests.Response) -> requests.Response:
    while answer.is_redirect and urljoin(ISSUER, answer.headers["Location"]).startswith(ISSUER):
        answer = provider.get(
            urljoin(ISSUER, answer.headers["Location"]), allow_redirects=False, timeout=10
        )
    return answer
