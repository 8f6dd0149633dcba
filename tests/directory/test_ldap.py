"""Log-in through the centre's directory and enrolment from its groups, against the real OpenLDAP
of scripts/slapd (tests/directory/directory.ldif: every password is "<uid>-pw-2026"; ana is a
local account of the tests too, whose local password wins)."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import change_settings, log_in, logged_in, the_course

pytestmark = [pytest.mark.services, pytest.mark.ldap]
LDAP_URL = os.environ.get("HPCGRADE_TEST_LDAP_URL")
LDAPS_URL = os.environ.get("HPCGRADE_TEST_LDAPS_URL")
CA_FILE = os.environ.get("HPCGRADE_TEST_LDAP_CA")
SUFFIX = "dc=hpcgrade,dc=test"
# the settings but LDAP_URL; StartTLS on ldap://
DIRECTORY = {
    "LDAP_USER_BASE": f"ou=people,{SUFFIX}",
    "LDAP_GROUP_BASE": f"ou=groups,{SUFFIX}",
    "LDAP_BIND_DN": f"cn=hpcgrade-reader,{SUFFIX}",
    "LDAP_BIND_PASSWORD": "reader-pw-2026",
    "LDAP_CA_FILE": CA_FILE,
    "LDAP_TIMEOUT_SECONDS": 2,
}
GROUPS = {"student": ["pytorch-students"], "ta": ["pytorch-tas"], "instructor": ["pytorch-staff"]}
DOWN = "ldaps://127.0.0.1:1"  # no directory answers there


@pytest.fixture(scope="module", autouse=True)
def directory():
    """The tests' directory: skipped where scripts/slapd did not run, except in CI."""
    if not LDAP_URL:
        if os.environ.get("CI"):
            pytest.fail('HPCGRADE_TEST_LDAP_URL is unset: run eval "$(scripts/slapd)" first')
        pytest.skip('no directory: eval "$(scripts/slapd)" starts the tests\' OpenLDAP')


def directory_settings(url: str = LDAP_URL) -> dict:
    return {**DIRECTORY, "LDAP_URL": url, "LDAP_START_TLS": url.startswith("ldap://")}


@pytest.fixture
def ldap_app(course):
    """The tests' course (local accounts ana and bea) on the directory, its roles from groups."""
    change_settings(course, **directory_settings())
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        the_course(session).directory_groups = GROUPS
        session.commit()
    return course


def account(app, username: str):
    """(the account's auth_source, name, email, {course: (role, from_directory)}) or None."""
    from server.core.models import Course, Enrolment, User

    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        user = session.scalar(sa.select(User).where(User.username == username))
        if user is None:
            return None
        enrolled = {
            slug: (role, made)
            for slug, role, made in session.execute(
                sa.select(Course.slug, Enrolment.role, Enrolment.from_directory)
                .join(Enrolment.course)
                .where(Enrolment.user_id == user.id)
            )
        }
        return user.auth_source, user.name, user.email, enrolled


@contextmanager
def group_changed(group: str, add: tuple[str, ...] = (), remove: tuple[str, ...] = ()):
    """A groupOfNames of the directory with these members added and removed, as before after."""
    from ldap3 import MODIFY_ADD, MODIFY_DELETE, Connection, Server, Tls

    tls = Tls(ca_certs_file=CA_FILE)
    with Connection(
        Server(LDAPS_URL, use_ssl=True, tls=tls),
        os.environ["HPCGRADE_TEST_LDAP_ADMIN"],
        os.environ["HPCGRADE_TEST_LDAP_ADMIN_PASSWORD"],
        auto_bind=True,
    ) as admin:
        dn, people = f"cn={group},ou=groups,{SUFFIX}", f"ou=people,{SUFFIX}"

        def members(names, how):
            return {"member": [(how, [f"uid={name},{people}" for name in names])]}

        if add:
            assert admin.modify(dn, members(add, MODIFY_ADD)), admin.result
        if remove:
            assert admin.modify(dn, members(remove, MODIFY_DELETE)), admin.result
        try:
            yield
        finally:
            if remove:
                admin.modify(dn, members(remove, MODIFY_ADD))
            if add:
                admin.modify(dn, members(add, MODIFY_DELETE))


# --- log-in -----------------------------------------------------------------------------------


@pytest.mark.parametrize("url", [LDAP_URL, LDAPS_URL], ids=["starttls", "ldaps"])
def test_the_first_log_in_makes_the_account_from_the_directory(ldap_app, url):
    change_settings(ldap_app, **directory_settings(url))
    assert account(ldap_app, "luis") is None
    answer = log_in(ldap_app.test_client(), "luis", "luis-pw-2026")
    assert answer.status_code == 302, answer.text
    assert account(ldap_app, "luis") == (
        "ldap",
        "Luis Perez",
        "luis@uni.test",
        {"pytorch": ("student", True)},
    )
    client, _token = logged_in(ldap_app, "luis", "luis-pw-2026")  # and the next time
    assert "Tensors and autograd" in client.get("/courses/pytorch/", follow_redirects=True).text
    assert names(ldap_app, "luis") == ("Luis", "Perez")  # givenName and sn
    log_in(ldap_app.test_client(), "marta", "marta-pw-2026")
    assert names(ldap_app, "marta") == ("Marta", "Ruiz")  # sn, and the rest of cn: no givenName


def names(app, username: str) -> tuple[str, str]:
    """The account's given and family names."""
    from server.core.models import User

    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        user = session.scalar(sa.select(User).where(User.username == username))
        return user.given_name, user.family_name


@pytest.mark.parametrize(
    "username, password",
    [
        ("luis", "wrong-password"),
        ("luis", ""),
        ("nobody", "nobody-pw-2026"),
        ("lu*", "luis-pw-2026"),
        ("luis)(uid=luis", "luis-pw-2026"),
        ("*)(uid=*", "luis-pw-2026"),
        ("*", "luis-pw-2026"),
    ],
    ids=["wrong", "empty", "unknown", "wildcard", "injected", "injected-any", "star"],
)
def test_wrong_credentials_and_filter_injections_log_no_one_in(ldap_app, username, password):
    answer = log_in(ldap_app.test_client(), username, password)
    assert answer.status_code == 401 and "Wrong username or password" in answer.text
    assert account(ldap_app, "luis") is None


def test_the_client_never_binds_with_an_empty_password_nor_an_escaped_name():
    from server.core.config import load_settings
    from server.core.ldap_directory import checked_person

    settings = load_settings(directory_settings())
    assert checked_person(settings, "luis", "luis-pw-2026").username == "luis"
    assert checked_person(settings, "luis", "") is None
    assert checked_person(settings, "lu*", "luis-pw-2026") is None
    assert checked_person(settings, "luis)(uid=luis", "luis-pw-2026") is None


def test_a_directory_that_cannot_be_reached_is_a_503_not_a_wrong_password(ldap_app):
    change_settings(ldap_app, LDAP_URL=DOWN)
    client = ldap_app.test_client()
    answer = log_in(client, "luis", "luis-pw-2026")
    assert answer.status_code == 503
    assert "directory cannot be reached" in answer.text and "Wrong" not in answer.text
    token = client.post("/api/v1/tokens", json={"username": "luis", "password": "luis-pw-2026"})
    assert token.status_code == 503 and "cannot be reached" in token.json["error"]
    assert log_in(client, "ana", "long-password").status_code == 302  # local accounts still do


def test_a_local_account_wins_over_the_directory_and_is_never_taken_over(ldap_app):
    before = account(ldap_app, "ana")
    assert before[0] == "local"
    assert log_in(ldap_app.test_client(), "ana", "ana-pw-2026").status_code == 401
    # another spelling finds the directory's ana, whose account here is the local one
    refused = log_in(ldap_app.test_client(), "ANA", "ana-pw-2026")
    assert refused.status_code == 403 and "is another person&#39;s" in refused.text
    assert log_in(ldap_app.test_client(), "ana", "long-password").status_code == 302
    assert account(ldap_app, "ana") == before


def test_directory_log_ins_are_throttled_with_the_same_counters(ldap_app):
    from limits import parse_many

    ldap_app.extensions["hpcgrade.throttle"].limits["account"] = parse_many("2 per minute")
    client = ldap_app.test_client()
    assert [log_in(client, "luis", "wrong-password").status_code for _ in range(2)] == [401, 401]
    assert log_in(client, "luis", "luis-pw-2026").status_code == 429


def test_an_api_token_through_the_directory(ldap_app):
    made = ldap_app.test_client().post(
        "/api/v1/tokens", json={"username": "tomas", "password": "tomas-pw-2026"}
    )
    assert made.status_code == 201 and made.json["username"] == "tomas"


# --- enrolment from groups ------------------------------------------------------------------


def test_groups_enrol_with_the_highest_role_and_follow_the_groups(ldap_app):
    for username in ("marta", "tomas", "luis"):
        assert log_in(ldap_app.test_client(), username, f"{username}-pw-2026").status_code == 302
    assert account(ldap_app, "marta")[3] == {"pytorch": ("instructor", True)}  # students, staff
    assert account(ldap_app, "tomas")[3] == {"pytorch": ("ta", True)}  # a posixGroup
    with ldap_app.app_context():
        session = ldap_app.extensions["hpcgrade.db"].sessions()
        course = the_course(session)
        course.directory_groups = {"ta": ["pytorch-students"]}  # a role change
        session.commit()
    assert log_in(ldap_app.test_client(), "luis", "luis-pw-2026").status_code == 302
    assert account(ldap_app, "luis")[3] == {"pytorch": ("ta", True)}
    assert log_in(ldap_app.test_client(), "tomas", "tomas-pw-2026").status_code == 302
    assert account(ldap_app, "tomas")[3] == {}  # its group enrols no more


def test_an_enrolment_made_by_hand_is_left_alone(ldap_app):
    from server.core.courses import enrol
    from server.core.models import User

    assert log_in(ldap_app.test_client(), "nadia", "nadia-pw-2026").status_code == 302
    assert account(ldap_app, "nadia")[3] == {}  # in no group
    with ldap_app.app_context():
        session = ldap_app.extensions["hpcgrade.db"].sessions()
        nadia = session.scalar(sa.select(User).where(User.username == "nadia"))
        enrol(session, nadia, the_course(session), "ta")
        session.commit()
    assert log_in(ldap_app.test_client(), "nadia", "nadia-pw-2026").status_code == 302
    assert account(ldap_app, "nadia")[3] == {"pytorch": ("ta", False)}


@pytest.fixture
def synced_database(database):
    """The `database` fixture (local ana in the course) with the course's groups named, and the
    environment `hpcgrade` reads its settings from."""
    with database.sessions.begin() as session:
        the_course(session).directory_groups = GROUPS
    url = database.engine.url.render_as_string(hide_password=False)
    return database, {"HPCGRADE_DATABASE_URL": url, **environment(directory_settings())}


def environment(settings: dict) -> dict:
    return {
        f"HPCGRADE_{name}": str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in settings.items()
    }


def test_users_sync_enrols_who_never_logged_in_and_follows_the_groups(synced_database):
    from worker.cli.main import main

    database, env = synced_database
    first = CliRunner().invoke(main, ["users", "sync"], env=env)
    assert first.exit_code == 0, first.output
    assert set(first.stdout.splitlines()) == {
        "pytorch: luis - -> student",
        "pytorch: marta - -> instructor",
        "pytorch: tomas - -> ta",
    }
    assert "no account for ana" in first.stderr  # the local ana stays as she is
    again = CliRunner().invoke(main, ["users", "sync", "--course", "pytorch"], env=env)
    assert again.exit_code == 0 and again.stdout == "" and "0 changes" in again.stderr
    with (
        group_changed("pytorch-staff", add=("nadia",)),
        group_changed("pytorch-students", remove=("luis",)),
    ):
        changed = CliRunner().invoke(main, ["users", "sync"], env=env)
    assert set(changed.stdout.splitlines()) == {
        "pytorch: nadia - -> instructor",
        "pytorch: luis student -> -",
    }
    from server.core.models import User

    with database.sessions() as session:
        nadia = session.scalar(sa.select(User).where(User.username == "nadia"))
        assert (nadia.name, nadia.email, nadia.auth_source) == (
            "Nadia Sanz",
            "nadia@uni.test",
            "ldap",
        )


def test_users_sync_says_what_is_wrong_and_changes_nothing(synced_database):
    from worker.cli.main import main

    _database, env = synced_database
    unknown = CliRunner().invoke(main, ["users", "sync", "--course", "nope"], env=env)
    assert unknown.exit_code == 1 and "no course nope" in unknown.output
    down = CliRunner().invoke(
        main, ["users", "sync"], env={**env, **environment(directory_settings(DOWN))}
    )
    assert down.exit_code == 1 and "nothing changed" in down.output


def test_beat_syncs_while_a_directory_is_set(tmp_path):
    from server.web.app import create_app
    from worker.grading import tasks  # noqa: F401  (the worker imports them)

    base = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "SECRET_KEY": "test",
        "TESTING": True,
        "BROKER_URL": "redis://127.0.0.1:1/0",
        "LOGIN_LIMITS_STORAGE": "memory://",
    }
    celery = create_app({**base, **directory_settings(), "LDAP_SYNC_MINUTES": 30}).extensions[
        "celery"
    ]
    scheduled = {entry["task"]: entry["schedule"] for entry in celery.conf.beat_schedule.values()}
    assert scheduled["hpcgrade.users_sync"] == 1800 and "hpcgrade.users_sync" in celery.tasks
    plain = create_app(base).extensions["celery"]
    assert "hpcgrade.users_sync" not in {e["task"] for e in plain.conf.beat_schedule.values()}


# --- no password here for a directory account -----------------------------------------------


@pytest.fixture
def ines(ldap_app):
    """ldap_app with ines, a local instructor of its course."""
    from server.core.users import add_user

    with ldap_app.app_context():
        session = ldap_app.extensions["hpcgrade.db"].sessions()
        add_user(
            session,
            "ines",
            "Ines",
            "i@uni.es",
            "instructor",
            "long-password",
            course=the_course(session),
        )
        session.commit()
    return ldap_app


def test_a_directory_account_gets_no_set_password_link_nor_password(ldap_app, ines):
    from server.core.links import make_link
    from server.core.models import User
    from server.core.users import UserError, clear_password, set_password

    luis, _token = logged_in(ldap_app, "luis", "luis-pw-2026")
    staff, token = logged_in(ldap_app, "ines")
    reset = staff.post(
        "/courses/pytorch/staff/roster/luis/password",
        data={"csrf_token": token},
        follow_redirects=True,
    )
    assert "password is changed there" in reset.text and "/account/set-password/" not in reset.text
    assert "luis" not in staff.get("/courses/pytorch/staff/roster/waiting").text
    assert "password there" in luis.get("/account/password", follow_redirects=True).text
    with ldap_app.test_request_context():
        session = ldap_app.extensions["hpcgrade.db"].sessions()
        user = session.scalar(sa.select(User).where(User.username == "luis"))
        for refused in (
            lambda: make_link(user),
            lambda: set_password(session, user, "x" * 12),
            lambda: clear_password(session, user),
        ):
            with pytest.raises((ValueError, UserError)):
                refused()


def test_a_roster_naming_a_directory_account_enrols_it(ldap_app, ines):
    assert log_in(ldap_app.test_client(), "nadia", "nadia-pw-2026").status_code == 302
    staff, token = logged_in(ldap_app, "ines")
    done = staff.post(
        "/courses/pytorch/staff/roster/import",
        data={
            "csrf_token": token,
            "roster": "username,name,email,role\nnadia,N,n@uni.es,student\n",
        },
        follow_redirects=True,
    )
    assert (
        "existing account was enrolled" in done.text and "/account/set-password/" not in done.text
    )
    assert account(ldap_app, "nadia")[0] == "ldap"
    assert account(ldap_app, "nadia")[3] == {"pytorch": ("student", False)}


def test_a_rosters_new_directory_people_log_in_with_its_password_and_guests_get_links(
    ldap_app, ines
):
    """A roster imported before anyone logged in: the usernames the directory knows become its
    accounts (no link, which would make them local and lock them out of their directory log-in);
    the others are guests, with links."""
    staff, token = logged_in(ldap_app, "ines")
    done = staff.post(
        "/courses/pytorch/staff/roster/import",
        data={
            "csrf_token": token,
            "roster": "username,name,email,role\nnadia,N,n@uni.es,student\n"
            "guest7,Guest,g@uni.es,student\n",
        },
    )
    assert done.status_code == 200
    assert "/account/set-password/" in done.text and "guest7" in done.text
    assert "nadia logs in with the password of the centre&#39;s directory" in done.text
    assert account(ldap_app, "nadia")[0] == "ldap" and account(ldap_app, "guest7")[0] == "local"
    assert log_in(ldap_app.test_client(), "nadia", "nadia-pw-2026").status_code == 302
    added = staff.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "tomas",
            "name": "T",
            "email": "t@uni.es",
            "role": "student",
        },
        follow_redirects=True,
    )
    assert "tomas logs in with the password of the centre&#39;s directory" in added.text
    assert account(ldap_app, "tomas")[0] == "ldap"
    change_settings(ldap_app, LDAP_URL=DOWN)
    refused = staff.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": "username,name,email,role\nluis,L,l@uni.es,student\n"},
        follow_redirects=True,
    )
    assert "directory cannot be reached" in refused.text and account(ldap_app, "luis") is None


def test_the_command_line_import_makes_the_directorys_people_its_accounts(
    synced_database, tmp_path
):
    from worker.cli.main import main

    _database, env = synced_database
    roster = tmp_path / "roster.csv"
    roster.write_text(
        "username,name,email,role\nluis,L,l@uni.es,student\nguest7,G,g@uni.es,student\n"
    )
    env = {**env, "HPCGRADE_SECRET_KEY": "test"}  # which signs the guests' links
    done = CliRunner().invoke(main, ["users", "import", str(roster)], env=env)
    assert done.exit_code == 0, done.output
    assert [line.split(",")[0] for line in done.stdout.splitlines()] == ["username", "guest7"]
    assert "log in with its password (no link): luis" in done.stderr
    roster.write_text("username,name,email,role\nnadia,N,n@uni.es,student\n")
    down = CliRunner().invoke(
        main, ["users", "import", str(roster)], env={**env, **environment(directory_settings(DOWN))}
    )
    assert down.exit_code == 1 and "nothing was added" in down.output


def test_a_course_whose_group_the_directory_does_not_give_is_left_as_it_is(synced_database):
    """A group renamed (or its members hidden from the service account) reads as no members:
    the sync must not take the whole class out of its course for it."""
    from server.core.models import Enrolment
    from worker.cli.main import main

    database, env = synced_database
    assert CliRunner().invoke(main, ["users", "sync"], env=env).exit_code == 0
    with database.sessions.begin() as session:
        the_course(session).directory_groups = {**GROUPS, "student": ["pytorch-students-2027"]}
    renamed = CliRunner().invoke(main, ["users", "sync"], env=env)
    assert renamed.exit_code == 0 and renamed.stdout == ""
    assert (
        "pytorch left as it is: the directory gave no members of pytorch-students-2027"
        in renamed.stderr
    )
    with database.sessions() as session:
        assert (
            session.scalar(
                sa.select(sa.func.count()).select_from(Enrolment).where(Enrolment.from_directory)
            )
            == 3
        )


@pytest.mark.parametrize("variant", ["luis\u00ad", "luis\u200b", "ｌｕｉｓ", "LUİS"])
def test_spellings_the_directory_folds_never_reach_it(ldap_app, variant):
    """The directory would match them to luis: each would get a throttle count of its own."""
    assert log_in(ldap_app.test_client(), variant, "luis-pw-2026").status_code == 401
    assert account(ldap_app, "luis") is None


def test_an_entry_without_an_address_logs_in(ldap_app):
    with group_changed("pytorch-students", add=("nomail",)):
        answer = log_in(ldap_app.test_client(), "nomail", "nomail-pw-2026")
    assert answer.status_code == 302, answer.text
    assert account(ldap_app, "nomail") == ("ldap", "No Mail", "", {"pytorch": ("student", True)})
