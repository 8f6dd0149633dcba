"""A request sent again stores nothing twice (idempotency keys, API and page); API errors are JSON
whatever the status, and a database that cannot be reached is a 503 to retry."""

import datetime as dt
import io
import re
import threading
import uuid

import pytest
import sqlalchemy as sa
from helpers import (
    IN_COURSE,
    REFERENCE_Q,
    free_port,
    log_in,
    postgres_database,
    served_over_http,
    the_course,
)

from server.core.models import Exercise, Submission, User
from server.web.submissions import Rules, submit_once

KEY = {"Idempotency-Key": "3f6b2a1e-retry-me"}


@pytest.fixture
def client(course):
    return course.test_client()


def token(client, username="ana") -> dict:
    reply = client.post("/api/v1/tokens", json={"username": username, "password": "long-password"})
    return {"Authorization": f"Bearer {reply.json['token']}"}


def upload(client, headers, code=REFERENCE_Q, exercise="autograd-q"):
    return client.post(
        "/api/v1/submissions",
        headers=headers,
        data={"exercise": exercise, "file": (io.BytesIO(code.encode()), "work.py")},
    )


def stored(app) -> list[int]:
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        return list(session.scalars(sa.select(Submission.id)))


def attempts_left(client, headers) -> int:
    listed = client.get("/api/v1/exercises", headers=headers).json["exercises"]
    return next(e for e in listed if e["slug"] == "autograd-q")["attempts_left"]


def test_a_retried_api_request_gets_the_first_submission_and_uses_no_attempt(client, course):
    headers = {**token(client), **KEY}
    first, again = upload(client, headers), upload(client, headers)
    assert first.status_code == again.status_code == 202
    assert again.json == first.json and again.headers["Location"] == first.headers["Location"]
    assert (first.headers["Idempotent-Replayed"], again.headers["Idempotent-Replayed"]) == (
        "false",
        "true",
    )
    assert stored(course) == [first.json["id"]] and attempts_left(client, headers) == 19
    # another student's key is theirs alone; no key means a new submission every time
    assert upload(client, {**token(client, "bea"), **KEY}).json["id"] != first.json["id"]
    assert upload(client, token(client)).json["id"] != first.json["id"]
    assert len(stored(course)) == 3


def test_a_key_sent_with_another_file_is_refused(client, course):
    headers = {**token(client), **KEY}
    upload(client, headers)
    other = upload(client, headers, code=REFERENCE_Q + "\n# changed\n")
    assert other.status_code == 422 and "idempotency key" in other.json["error"]
    assert len(stored(course)) == 1


@pytest.mark.parametrize("key", ["k" * 129, "tab\tinside", "clé", "line\x7f"])
def test_a_key_is_at_most_128_printable_ascii_characters(client, course, key):
    reply = upload(client, {**token(client), "Idempotency-Key": key})
    assert reply.status_code == 400 and "128 printable ASCII" in reply.json["error"]
    assert stored(course) == []
    assert upload(client, {**token(client), "Idempotency-Key": "k" * 128}).status_code == 202


def test_a_retry_after_a_500_that_came_after_the_commit_stores_one_submission(
    client, course, monkeypatch
):
    course.config["PROPAGATE_EXCEPTIONS"] = False  # answer as in production, not raise to the test

    from server.core.queue import enqueue

    sent = []

    def enqueue_failing_once(celery, session, ids):
        if not sent:
            sent.append(ids)
            raise RuntimeError("lost after the commit")
        sent.append(ids)
        return enqueue(celery, session, ids)

    monkeypatch.setattr("server.web.api.enqueue", enqueue_failing_once)
    headers = {**token(client), **KEY}
    failed = upload(client, headers)
    assert failed.status_code == 500 and failed.is_json and failed.json["error"]
    retried = upload(client, headers)
    assert retried.status_code == 202 and retried.headers["Idempotent-Replayed"] == "true"
    assert stored(course) == [retried.json["id"]] and attempts_left(client, headers) == 19
    # the first request never sent it: the replay does (the broker is away here, so the
    # submission stays queued for reconcile, as any other would)
    assert sent == [[retried.json["id"]]] * 2


def test_api_errors_are_json_for_every_status(client):
    headers = token(client)
    for reply, status in [
        (client.get("/api/v1/submissions", headers=headers), 405),
        (client.get("/api/v1/nothing-here"), 404),
        (client.post("/api/v1/submissions", headers=headers, data={}), 400),
        (client.get("/api/v1/exercises"), 401),
    ]:
        assert reply.status_code == status and reply.is_json and reply.json["error"], reply.text
    assert "POST" in client.get("/api/v1/submissions", headers=headers).headers["Allow"]


def page_key(client, slug="autograd-q") -> tuple[str, str]:
    page = client.get(f"{IN_COURSE}/exercises/{slug}").text
    return (
        re.search(r'name="csrf_token" value="([^"]+)"', page).group(1),
        re.search(r'name="idempotency_key" value="([^"]+)"', page).group(1),
    )


def test_the_form_sent_twice_stores_one_submission(course):
    client = course.test_client()
    log_in(client)
    csrf, key = page_key(client)
    assert page_key(client)[1] != key  # a fresh key each time the page is shown
    assert client.get(f"{IN_COURSE}/exercises/autograd-q").headers["Cache-Control"] == "no-store"
    form = {"csrf_token": csrf, "idempotency_key": key, "code": REFERENCE_Q}
    first = client.post(f"{IN_COURSE}/exercises/autograd-q/submissions", data=form)
    again = client.post(f"{IN_COURSE}/exercises/autograd-q/submissions", data=form)
    assert first.status_code == again.status_code == 303
    assert again.headers["Location"] == first.headers["Location"]
    assert len(stored(course)) == 1
    bad = client.post(
        f"{IN_COURSE}/exercises/autograd-q/submissions", data={**form, "idempotency_key": "k" * 129}
    )
    assert "128 printable ASCII" in client.get(bad.headers["Location"]).text


def test_one_key_sent_at_once_from_many_requests_stores_one(database):
    """Every request reads 'not sent before' together; the unique key lets one store, and the
    others roll back and answer with it."""
    with database.sessions() as session:
        user_id = session.scalar(sa.select(User.id).where(User.username == "ana"))
    start, outcomes = threading.Barrier(6), []

    def send():
        with database.sessions() as session:
            user, exercise = (
                session.get(User, user_id),
                session.scalar(sa.select(Exercise).where(Exercise.slug == "autograd-q")),
            )
            session.commit()  # SQLite: hold no lock while the others get ready
            start.wait(timeout=30)
            submission, new = submit_once(
                session,
                user,
                exercise,
                "work.py",
                REFERENCE_Q.encode(),
                Rules(1024, 100, 60),
                dt.datetime.now(dt.timezone.utc),
                "same-key",
            )
            outcomes.append((submission.id, new))

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({submission_id for submission_id, _ in outcomes}) == 1 and len(outcomes) == 6
    assert sum(new for _, new in outcomes) == 1
    with database.sessions() as session:
        assert session.scalar(sa.select(sa.func.count()).select_from(Submission)) == 1


def test_the_losing_commit_of_a_race_answers_with_the_winner(database, monkeypatch):
    """The lost race itself, made certain: the second request read before the first committed."""
    import server.web.submissions

    rules, now = Rules(1024, 100, 60), dt.datetime.now(dt.timezone.utc)

    def send(session):
        user = session.scalar(sa.select(User).where(User.username == "ana"))
        exercise = session.scalar(sa.select(Exercise).where(Exercise.slug == "autograd-q"))
        return submit_once(
            session, user, exercise, "work.py", REFERENCE_Q.encode(), rules, now, "k"
        )

    with database.sessions() as session:
        winner, _ = send(session)
    looked_up, calls = server.web.submissions._sent_before, []

    def read_before_the_winner_committed(*args):
        calls.append(args)
        return None if len(calls) == 1 else looked_up(*args)

    monkeypatch.setattr(server.web.submissions, "_sent_before", read_before_the_winner_committed)
    with database.sessions() as session:
        loser, new = send(session)
    assert (loser.id, new) == (winner.id, False) and len(calls) == 2


def unreachable_app(url):
    from server.web.app import create_app

    return create_app(
        {
            "DATABASE_URL": url,
            "SECRET_KEY": "test",
            "TESTING": True,
            "BROKER_URL": "redis://127.0.0.1:1/0",
        }
    )


def assert_unavailable(app):
    client = app.test_client()
    api = client.get("/api/v1/exercises", headers={"Authorization": "Bearer whatever"})
    assert api.status_code == 503 and api.is_json and int(api.headers["Retry-After"]) > 0
    assert "database" in api.json["error"]
    sent = client.post(
        "/api/v1/submissions",
        headers={"Authorization": "Bearer x", **KEY},
        data={"exercise": "autograd-q", "file": (io.BytesIO(b"x = 1\n"), "w.py")},
    )
    assert sent.status_code == 503 and sent.is_json
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    page = client.post(
        "/login?lang=es", data={"username": "ana", "password": "long-password", "csrf_token": csrf}
    )
    assert page.status_code == 503 and page.headers["Retry-After"] and page.mimetype == "text/html"
    assert "No se puede acceder a la base de datos" in page.text


def test_a_database_nobody_listens_on_is_a_503_with_retry_after():
    app = unreachable_app(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/hpcgrade")
    assert_unavailable(app)


@pytest.mark.services
def test_a_postgresql_that_goes_away_is_a_503_and_comes_back():
    from helpers import POSTGRES

    from server.core import migrate
    from server.core.catalogue import load_catalogue
    from server.core.exercises import sync_exercises
    from server.core.users import add_user

    for url in postgres_database():
        migrate.upgrade(url)
        app = unreachable_app(url)
        database = app.extensions["hpcgrade.db"]
        with database.sessions.begin() as session:
            sync_exercises(session, the_course(session), load_catalogue())
            add_user(session, "ana", "Ana", "a@uni.es", "student", "long-password")
        client = app.test_client()
        headers = token(client)
        assert client.get("/api/v1/exercises", headers=headers).status_code == 200
        name = url.rsplit("/", 1)[1]
        admin = sa.create_engine(f"{POSTGRES}/postgres", isolation_level="AUTOCOMMIT")
        with admin.connect() as connection:  # the outage: connections cut, new ones refused
            connection.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
            connection.execute(
                sa.text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :name"
                ),
                {"name": name},
            )
        assert_unavailable(app)
        with admin.connect() as connection:
            connection.execute(sa.text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true'))
        admin.dispose()
        sent = upload(client, {**headers, "Idempotency-Key": str(uuid.uuid4())})
        assert sent.status_code == 202
        database.dispose()


def test_the_terminal_client_sends_one_key_and_reuses_it_when_it_retries(
    course, monkeypatch, tmp_path
):
    """`hpcgrade submit` against a real HTTP server whose first answer is a 500 after the commit:
    the client sends again, with the same key, and one submission is stored."""
    from click.testing import CliRunner

    from hpcgrade.terminal import submit

    course.config["PROPAGATE_EXCEPTIONS"] = False
    failures = [RuntimeError("lost after the commit")]

    def enqueue_failing_once(*_args):
        if failures:
            raise failures.pop()

    monkeypatch.setattr("server.web.api.enqueue", enqueue_failing_once)
    client = course.test_client()
    token = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    work = tmp_path / "work.py"
    work.write_text(REFERENCE_Q)
    with served_over_http(course) as url:
        result = CliRunner().invoke(
            submit,
            ["autograd-q", str(work), "--no-wait"],
            env={"HPCGRADE_SERVER": url, "HPCGRADE_TOKEN": token.json["token"]},
        )
    assert result.exit_code == 0, result.output
    assert failures == []  # the first try did fail
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        rows = session.execute(sa.select(Submission.id, Submission.idempotency_key)).all()
    assert len(rows) == 1 and uuid.UUID(rows[0].idempotency_key)
    # the web page's address, in the submission's course
    assert result.stdout.strip().endswith(f"{IN_COURSE}/submissions/{rows[0].id}")
    assert "/api/" not in result.stdout
