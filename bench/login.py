"""One log-in by each path, in the same run: a local account's password (`POST /login`, its
scrypt hash at werkzeug's real cost), the centre's directory (`POST /login`: the service bind,
the search, the bind as the person, their groups, over StartTLS and over ldaps) and the OpenID
Connect provider (`GET /login/oidc` to the session cookie: hpcgrade's redirect, the provider's
form posted, its redirects, the code exchanged, the ID token checked, the account and its
enrolments). Each log-in is a new browser: a new test client, and for the provider a new
requests session (no single sign-on session to reuse). Interleaved rounds; medians.

hpcgrade runs in process (Flask's test client, SQLite); the directory and the provider are the
tests' real ones. Needs `eval "$(scripts/slapd)"; eval "$(scripts/oidc)"`:

    .venv/bin/python bench/login.py [--rounds 5] [--each 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import oidc_provider  # noqa: E402
import requests  # noqa: E402
from helpers import CSRF_TOKEN, new_course  # noqa: E402

from server.core import migrate  # noqa: E402
from server.core.users import add_user  # noqa: E402
from server.web.app import create_app  # noqa: E402

SUFFIX = "dc=hpcgrade,dc=test"
DIRECTORY = {
    "LDAP_USER_BASE": f"ou=people,{SUFFIX}",
    "LDAP_GROUP_BASE": f"ou=groups,{SUFFIX}",
    "LDAP_BIND_DN": f"cn=hpcgrade-reader,{SUFFIX}",
    "LDAP_BIND_PASSWORD": "reader-pw-2026",
    "LDAP_CA_FILE": os.environ.get("HPCGRADE_TEST_LDAP_CA"),
}
GROUPS = {"student": ["pytorch-students"], "instructor": ["pytorch-staff"]}


def app_on(url: str, ldap_url: str):
    return create_app(
        {
            "DATABASE_URL": url,
            "SECRET_KEY": uuid.uuid4().hex,
            "BROKER_URL": "redis://127.0.0.1:1/0",
            "LOGIN_LIMITS_STORAGE": "memory://",
            **DIRECTORY,
            "LDAP_URL": ldap_url,
            "LDAP_START_TLS": ldap_url.startswith("ldap://"),
            **oidc_provider.settings(),
        }
    )


def password_log_in(app, username: str, password: str) -> float:
    client = app.test_client()
    token = CSRF_TOKEN.search(client.get("/login").text).group(1)
    started = time.perf_counter()
    answer = client.post(
        "/login", data={"username": username, "password": password, "csrf_token": token}
    )
    assert answer.status_code == 302, answer.status_code
    return time.perf_counter() - started


def provider_log_in(app, person: dict) -> float:
    client, browser = app.test_client(), requests.Session()
    started = time.perf_counter()
    to_provider = client.get("http://127.0.0.1/login/oidc").location
    back = oidc_provider.sign_in(browser, to_provider, person["login"], person["password"])
    answer = client.get(back.headers["Location"])
    assert answer.status_code == 302 and "session" in answer.headers.get("Set-Cookie", "")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--each", type=int, default=10)
    args = parser.parse_args()
    if not (os.environ.get("HPCGRADE_TEST_LDAP_URL") and oidc_provider.ISSUER):
        sys.exit('run eval "$(scripts/slapd)"; eval "$(scripts/oidc)" first')
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/login.sqlite"
        migrate.upgrade(url)
        starttls = app_on(url, os.environ["HPCGRADE_TEST_LDAP_URL"])
        ldaps = app_on(url, os.environ["HPCGRADE_TEST_LDAPS_URL"])
        with starttls.app_context():
            session = starttls.extensions["hpcgrade.db"].sessions()
            course = new_course(session, "bench", directory_groups=GROUPS)
            add_user(
                session, "local1", "Local", "l@uni.es", "student", "bench-password", course=course
            )
            session.commit()
        person = oidc_provider.new_person(groups=("pytorch-students",))
        paths = {
            "local password": lambda: password_log_in(starttls, "local1", "bench-password"),
            "directory, StartTLS": lambda: password_log_in(starttls, "marta", "marta-pw-2026"),
            "directory, ldaps": lambda: password_log_in(ldaps, "marta", "marta-pw-2026"),
            "OpenID Connect": lambda: provider_log_in(starttls, person),
        }
        for log_in in paths.values():  # warm up: the provider's discovery, TLS contexts…
            log_in()
        seconds = {name: [] for name in paths}
        for _ in range(args.rounds):
            for name, log_in in paths.items():
                seconds[name] += [log_in() for _ in range(args.each)]
    print(f"one log-in, {args.rounds} rounds of {args.each}, median (p90):")
    for name, figures in seconds.items():
        ordered = sorted(figures)
        print(
            f"  {name:<22} {statistics.median(figures) * 1000:7.1f} ms "
            f"({ordered[int(0.9 * (len(ordered) - 1))] * 1000:.1f} ms)"
        )


if __name__ == "__main__":
    main()
