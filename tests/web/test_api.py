"""The JSON API: tokens, exercises, submissions, errors as JSON with the right status."""
import io
import time

import pytest
import sqlalchemy as sa

from helpers import REFERENCE_Q


@pytest.fixture
def client(course):
    return course.test_client()


def token(client, username="ana") -> dict:
    reply = client.post("/api/v1/tokens", json={"username": username, "password": "long-password"})
    assert reply.status_code == 201
    return {"Authorization": f"Bearer {reply.json['token']}"}


def upload(client, headers, code=REFERENCE_Q, filename="work.py", exercise="autograd-q"):
    return client.post("/api/v1/submissions", headers=headers,
                       data={"exercise": exercise, "file": (io.BytesIO(code.encode()), filename)})


def test_token_exercises_submit_and_read(client):
    headers = token(client)
    listed = client.get("/api/v1/exercises", headers=headers).json["exercises"]
    q = next(e for e in listed if e["slug"] == "autograd-q")
    assert q["attempts_left"] == 20 and q["best_score"] is None and q["deadline_policy"] == "penalty"
    started = time.monotonic()
    created = upload(client, headers)
    assert time.monotonic() - started < 5  # the broker is away: the request does not hang on it
    assert created.status_code == 202 and created.headers["Location"] == created.json["url"]
    status = client.get(created.json["url"], headers=headers).json
    assert status["status"] == "queued" and status["queue_position"] == 1 and status["checks"] == []
    listed = client.get("/api/v1/exercises", headers=headers).json["exercises"]
    assert next(e for e in listed if e["slug"] == "autograd-q")["attempts_left"] == 19


def test_an_exercises_public_files_and_nothing_else(client):
    headers = token(client)
    files = client.get("/api/v1/exercises/autograd-accumulation/files", headers=headers).json
    assert sorted(files["files"]) == ["starter.py", "support.py", "visible.py"]
    assert files["limits"] == {"call_seconds": 10} and files["exercise"] == "autograd-accumulation"
    missing = client.get("/api/v1/exercises/no-such-one/files", headers=headers)
    assert missing.status_code == 404 and missing.json == {"error": "no such exercise"}
    assert client.get("/api/v1/exercises/autograd-q/files").status_code == 401


def test_errors_are_json(client):
    assert client.get("/api/v1/exercises").status_code == 401
    assert client.get("/api/v1/exercises", headers={"Authorization": "Bearer nope"}).json["error"]
    bad_login = client.post("/api/v1/tokens", json={"username": "ana", "password": "wrong"})
    assert bad_login.status_code == 401 and bad_login.json == {"error": "wrong username or password"}
    headers = token(client)
    assert upload(client, headers, filename="work.txt").status_code == 400
    assert upload(client, headers, exercise="nope").status_code == 404
    assert upload(client, headers, code="x" * (2 << 20)).status_code == 413
    spanish = client.post("/api/v1/submissions?lang=es", headers=headers,
                          data={"exercise": "autograd-q", "file": (io.BytesIO(b""), "w.py")})
    assert spanish.json == {"error": "El archivo está vacío."}
    missing = client.post("/api/v1/submissions", headers=headers, data={})
    assert missing.status_code == 400 and "multipart" in missing.json["error"]
    assert client.get("/api/v1/nothing-here", headers=headers).json["error"]
    assert client.get("/api/v1/submissions/999", headers=headers).status_code == 404


def test_another_students_submission_is_404(client):
    created = upload(client, token(client, "ana")).json
    reply = client.get(created["url"], headers=token(client, "bea"))
    assert reply.status_code == 404 and reply.json == {"error": "no such submission"}


def test_token_use_is_recorded_once_a_minute_not_per_request(client, course):
    from server.core.models import ApiToken
    headers = token(client)
    database = course.extensions["hpcgrade.db"]

    def last_used():
        with course.app_context(), database.sessions() as session:
            return session.scalar(sa.select(ApiToken.last_used_at))

    assert last_used() is None
    client.get("/api/v1/exercises", headers=headers)
    first = last_used()
    client.get("/api/v1/exercises", headers=headers)
    assert first is not None and last_used() == first


def test_a_deleted_token_is_refused_at_once(client, course):
    from server.core.models import ApiToken
    headers = token(client)
    assert client.get("/api/v1/exercises", headers=headers).status_code == 200
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.execute(sa.delete(ApiToken))
        session.commit()
    assert client.get("/api/v1/exercises", headers=headers).status_code == 401


def test_a_token_whose_account_was_deleted_is_refused_at_once(client, course):
    from server.core.models import ApiToken, User
    headers = token(client, "bea")
    assert client.get("/api/v1/exercises", headers=headers).status_code == 200
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.execute(sa.delete(ApiToken))
        session.execute(sa.delete(User).where(User.username == "bea"))
        session.commit()
    assert client.get("/api/v1/exercises", headers=headers).status_code == 401
