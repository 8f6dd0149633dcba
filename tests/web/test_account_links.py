"""Set-password links: a new account (or one whose password staff reset) has no password until
its owner follows its link, which works once and expires; where mail is set up, each link is
mailed to its account, through a real SMTP server here (aiosmtpd)."""

import itertools
import re
import time

import pytest
from click.testing import CliRunner
from helpers import (
    CSRF_TOKEN,
    REFUSED,
    change_settings,
    free_port,
    logged_in,
    mail_settings,
    mails,
    new_course,
)
from itsdangerous.timed import TimestampSigner
from sqlalchemy import select
from test_roster import HEADER, links, set_password, users

from server.core import counters
from server.core.db import Database
from server.core.models import User
from worker.cli.main import main


@pytest.fixture
def waiting(course):
    """The course, with carl (a new account, no password yet) and prof, who added him."""
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        from server.core.users import add_user

        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    client, token = logged_in(course, "prof")
    added = client.post(
        "/courses/pytorch/staff/roster/add",
        data={
            "csrf_token": token,
            "username": "carl",
            "name": "Carl",
            "email": "c@uni.es",
            "role": "student",
        },
    )
    course.link = links(added.text)["carl"]
    return course


def form(client, link: str, new: str, repeat: str | None = None):
    token = CSRF_TOKEN.search(client.get(link).text).group(1)
    return client.post(
        link, data={"new": new, "repeat": new if repeat is None else repeat, "csrf_token": token}
    )


def test_a_link_sets_a_password_once_and_logs_its_owner_in(waiting):
    client = waiting.test_client()
    page = client.get(waiting.link)
    assert (
        page.status_code == 200
        and "Carl" in page.text
        and 'autocomplete="new-password"' in page.text
    )
    differ = form(client, waiting.link, "chosen-password", "other-password")
    assert differ.status_code == 400 and "The new passwords differ" in differ.text
    short = form(client, waiting.link, "short")
    assert short.status_code == 400 and "at least 8 characters" in short.text
    done = form(client, waiting.link, "chosen-password")
    assert done.status_code == 303 and done.headers["Location"] == "/"
    assert "Carl" in client.get("/courses/pytorch/").text  # logged in
    used = waiting.test_client().get(waiting.link)
    assert used.status_code == 410 and "This link was used already" in used.text
    again = form(client, waiting.link, "another-password")
    assert again.status_code == 410
    logged_in(waiting, "carl", "chosen-password")


def test_two_uses_at_once_set_one_password(waiting):
    """The password is written only over the hash the link was made for: of two forms sent
    with the same link, the second finds it changed."""
    first, second = waiting.test_client(), waiting.test_client()
    tokens = [CSRF_TOKEN.search(c.get(waiting.link).text).group(1) for c in (first, second)]
    answers = [
        c.post(
            waiting.link, data={"new": f"password-{n}", "repeat": f"password-{n}", "csrf_token": t}
        ).status_code
        for n, (c, t) in enumerate(zip((first, second), tokens))
    ]
    assert answers == [303, 410]


def test_an_expired_or_forged_link_is_refused_clearly(waiting, monkeypatch):
    from server.core.links import make_link

    with waiting.test_request_context():
        carl = (
            waiting.extensions["hpcgrade.db"]
            .sessions()
            .scalar(select(User).where(User.username == "carl"))
        )
        with monkeypatch.context() as past:
            now = time.time()
            past.setattr(time, "time", lambda: now - 15 * 86400)  # SET_PASSWORD_LINK_DAYS: 14
            old = make_link(carl)
    client = waiting.test_client()
    expired = client.get(old)
    assert expired.status_code == 410 and "This link has expired" in expired.text
    assert "ask your instructor for a new one" in expired.text
    forged = client.get(waiting.link[:-3] + ("abc" if not waiting.link.endswith("abc") else "xyz"))
    assert forged.status_code == 404 and "This link is not valid" in forged.text
    assert client.get("/account/set-password/nonsense").status_code == 404
    spanish = client.get(old + "?lang=es")
    assert "Este enlace ha caducado" in spanish.text
    assert client.get(waiting.link).status_code == 200  # the good one still works


def test_a_new_reset_retires_the_earlier_link(waiting):
    client, token = logged_in(waiting, "prof")
    reset = client.post("/courses/pytorch/staff/roster/carl/password", data={"csrf_token": token})
    newer = links(reset.text)["carl"]
    assert waiting.test_client().get(waiting.link).status_code == 410
    assert set_password(waiting, newer).status_code == 303


def test_an_account_waiting_for_a_password_cannot_log_in(waiting, monkeypatch):
    """No password can match it, and it costs a hash check as an unknown user does."""
    from server.core import users as accounts

    checked = []
    real = accounts.check_password_hash
    monkeypatch.setattr(
        accounts,
        "check_password_hash",
        lambda stored, password: checked.append(stored) or real(stored, password),
    )
    with waiting.app_context(), waiting.extensions["hpcgrade.db"].sessions() as session:
        marker = users(waiting)["carl"].password_hash
        for guess in ("", marker, "chosen-password"):
            assert accounts.authenticate(session, "carl", guess) is None
        accounts.authenticate(session, "nobody", "x")
    assert len(checked) == 4 and set(checked) == {accounts._unknown_user_hash()}


# --- mail -------------------------------------------------------------------------------------


def sent_links(recorder) -> dict[str, str]:
    """address → the link its mail holds."""
    found = {}
    for address, (_subject, body) in mails(recorder).items():
        match = re.search(r"https?://\S+/account/set-password/[\w.-]+", body)
        if match:
            found[address] = match.group(0)
    return found


@pytest.fixture
def staff_with_mail(course, smtp_server, monkeypatch):
    """prof, on a portal whose mail goes to the test's SMTP server; the mail task runs in this
    process when the page sends it (no broker here)."""
    from worker.grading.tasks import mail_links

    port, recorder = smtp_server
    change_settings(course, **mail_settings(port), PUBLIC_URL="https://grader.uni.es")
    monkeypatch.setattr(
        course.extensions["celery"],
        "send_task",
        lambda name, args, **options: mail_links.apply(args=args),
    )
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        from server.core.users import add_user

        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    return course, recorder


def test_an_import_mails_each_new_account_its_link(staff_with_mail):
    app, recorder = staff_with_mail
    client, token = logged_in(app, "prof")
    roster = (
        HEADER + "carl,Carl,c@uni.es,student\ndani,Dani,d@uni.es,student\n"
        "bea,Bea,b@uni.es,student\n"
    )  # in the course already, with her password
    done = client.post(
        "/courses/pytorch/staff/roster/import", data={"csrf_token": token, "roster": roster}
    )
    assert "The links are being mailed to their 2 addresses" in done.text
    mailed = sent_links(recorder)
    assert set(mailed) == {"c@uni.es", "d@uni.es"}
    assert mailed["c@uni.es"].startswith("https://grader.uni.es/account/set-password/")
    subject, body = mails(recorder)["c@uni.es"]
    assert subject == "Your hpcgrade account" and "Hello Carl" in body
    assert "your username is carl" in body and "within 14 days" in body
    path = mailed["c@uni.es"].removeprefix("https://grader.uni.es")
    assert set_password(app, path).status_code == 303
    logged_in(app, "carl", "chosen-password")


def test_an_address_the_server_refuses_is_reported_to_the_instructor(staff_with_mail):
    app, recorder = staff_with_mail
    client, token = logged_in(app, "prof", lang="es")
    roster = HEADER + f"carl,Carl,c@uni.es,student\nrita,Rita,{REFUSED},student\n"
    client.post(
        "/courses/pytorch/staff/roster/import", data={"csrf_token": token, "roster": roster}
    )
    assert set(sent_links(recorder)) == {"c@uni.es"}
    subject, report = mails(recorder)["p@uni.es"]  # in the language prof reads the portal in
    assert subject == "Enlaces para fijar la contraseña no enviados"
    assert f"rita <{REFUSED}>: 550 5.1.1 no such mailbox" in report
    assert "Hola, Carl" in mails(recorder)["c@uni.es"][1]
    assert "rita" in users(app)  # the import stands
    with app.extensions["hpcgrade.db"].sessions() as session:  # the operators' counts
        counted = {
            name: value
            for name, by_labels in counters.read(session).items()
            for value in by_labels.values()
        }
    assert (counted["mail_sent"], counted["mail_refused"]) == (2, 1)  # carl's link, prof's report


def test_a_mail_server_that_is_away_undoes_nothing_and_is_said(course, monkeypatch):
    change_settings(course, **mail_settings(free_port()))  # nothing listens there
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        from server.core.users import add_user

        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        session.commit()
    client, token = logged_in(course, "prof")
    done = client.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": HEADER + "carl,Carl,c@uni.es,student\n"},
    )
    assert done.status_code == 200 and "The links were not mailed" in done.text
    assert "Connection refused" in done.text and links(done.text)
    assert "carl" in users(course)


def test_the_task_queue_away_is_said_too(staff_with_mail, monkeypatch):
    app, recorder = staff_with_mail

    def broker_away(*args, **kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(app.extensions["celery"], "send_task", broker_away)
    client, token = logged_in(app, "prof")
    done = client.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": HEADER + "carl,Carl,c@uni.es,student\n"},
    )
    assert "The links were not mailed: the task queue cannot be reached" in done.text
    assert not recorder.messages and "carl" in users(app)


def same_account(link: str) -> str:
    """What a link names (the account and its password's state), not when it was signed: the
    printed link and the mailed one are signed apart, in two seconds when a second ticks between
    them (the test failed then, one run in about twenty)."""
    return link.rsplit("/", 1)[1].split(".")[0]


def test_the_cli_mails_the_links_too(tmp_path, monkeypatch, smtp_server):
    port, recorder = smtp_server
    ticks = itertools.count(int(time.time()))  # each link signed a second after the one before
    monkeypatch.setattr(TimestampSigner, "get_timestamp", lambda _signer: next(ticks))
    monkeypatch.setenv("HPCGRADE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite'}")
    for name, value in {
        **mail_settings(port),
        "SECRET_KEY": "test",
        "PUBLIC_URL": "https://grader.uni.es",
    }.items():
        monkeypatch.setenv(f"HPCGRADE_{name}", str(value))
    runner = CliRunner()
    assert runner.invoke(main, ["db", "upgrade"]).exit_code == 0
    database = Database(f"sqlite:///{tmp_path / 'cli.sqlite'}")
    with database.sessions.begin() as session:
        new_course(session)
        new_course(session, "mpi")
    database.dispose()
    roster = tmp_path / "roster.csv"
    roster.write_text(HEADER + f"carl,Carl,c@uni.es,student\nrita,Rita,{REFUSED},student\n")
    done = runner.invoke(
        main, ["users", "import", str(roster), "--lang", "es", "--course", "pytorch"]
    )
    assert done.exit_code == 0, done.output
    printed = dict(line.split(",") for line in done.stdout.splitlines()[1:])
    mailed = sent_links(recorder)
    assert set(mailed) == {"c@uni.es"}
    assert same_account(mailed["c@uni.es"]) == same_account(printed["carl"])
    assert mailed["c@uni.es"].startswith("https://grader.uni.es/account/set-password/")
    assert mails(recorder)["c@uni.es"][0] == "Tu cuenta de hpcgrade"
    assert f"1 link mailed; not mailed: rita <{REFUSED}>" in done.stderr


def test_a_mail_server_that_went_away_is_tried_again_later(staff_with_mail, monkeypatch):
    """The worker finds the server away after the page found it there: the task is tried again
    in a minute with the accounts not mailed yet, and nothing is lost meanwhile."""
    from server.core.users import add_user
    from worker.grading.tasks import mail_links

    app, recorder = staff_with_mail
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        ids = [
            add_user(session, name, name.title(), f"{name}@uni.es", "student", None)
            for name in ("carl", "dani")
        ]
        session.flush()
        ids = [user.id for user in ids]
        staff = session.scalar(select(User.id).where(User.username == "prof"))
        session.commit()
    change_settings(app, MAIL_PORT=free_port())  # nothing listens there now
    retried = []

    class Again(Exception):
        pass

    monkeypatch.setattr(mail_links, "retry", lambda **options: retried.append(options) or Again())
    with app.app_context(), pytest.raises(Again):
        mail_links.run(ids, "https://grader.uni.es", "en", staff)
    assert retried[0]["args"] == [ids, "https://grader.uni.es", "en", staff]
    assert retried[0]["countdown"] == 60 and not recorder.messages
