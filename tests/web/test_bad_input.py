"""Bad input gets a clear 400 and stores nothing: NUL bytes in any text field (PostgreSQL refuses
them, which was an HTML 500), and pastes as large as the upload limit, refused beyond it with the
limit named in the reader's language and the pasted text kept."""

import io
import re

import pytest
import sqlalchemy as sa
from helpers import log_in

from server.core.models import Submission

LIMIT = 1024 << 10  # MAX_UPLOAD_KB's default, in bytes


def csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


@pytest.fixture
def ana(course):
    client = course.test_client()
    log_in(client)
    return client, csrf(client.get("/courses/pytorch/exercises/autograd-q").text)


@pytest.fixture
def api(course):
    client = course.test_client()
    reply = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    return client, {"Authorization": f"Bearer {reply.json['token']}"}


def stored(app) -> int:
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalar(sa.select(sa.func.count()).select_from(Submission))


@pytest.mark.parametrize(
    "exercise, filename", [("autograd-q\x00", "work.py"), ("autograd-q", "work\x00.py")]
)
def test_nul_bytes_in_api_fields_are_a_json_400(api, course, exercise, filename):
    client, headers = api
    reply = client.post(
        "/api/v1/submissions?lang=es",
        headers=headers,
        data={"exercise": exercise, "file": (io.BytesIO(b"x = 1\n"), filename)},
    )
    assert reply.status_code == 400 and reply.is_json and "byte NUL" in reply.json["error"]
    assert stored(course) == 0


def test_nul_bytes_in_page_fields_are_a_400(ana, course):
    client, token = ana
    for data in [
        {"file": (io.BytesIO(b"x = 1\n"), "work\x00.py")},
        {"code": "x = 1\x00\n"},
        {"code": "x = 1\n", "idempotency_key": "k\x00"},
    ]:
        reply = client.post(
            "/courses/pytorch/exercises/autograd-q/submissions", data={"csrf_token": token, **data}
        )
        assert reply.status_code == 400 and "NUL byte" in reply.text, data
    for path in [
        "/courses/pytorch/exercises/autograd-q%00",
        "/courses/pytorch/submissions?lang=%00",
        "/courses/pytorch/staff/students/ana%00",
    ]:
        assert client.get(path).status_code == 400, path
    posted = client.post(
        "/courses/pytorch/exercises/%00/submissions", data={"csrf_token": token, "code": "x = 1"}
    )
    assert posted.status_code == 400
    assert stored(course) == 0


def test_nul_bytes_in_log_in_fields_are_a_400(course):
    client = course.test_client()
    page = log_in(client, "ana\x00")
    assert page.status_code == 400 and "NUL byte" in page.text
    api = client.post("/api/v1/tokens", json={"username": "ana\x00", "password": "x"})
    assert api.status_code == 400 and api.is_json and "NUL byte" in api.json["error"]


def paste(client, token, code: str):
    # as a browser sends the form: multipart, with the file field left empty
    return client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": code, "file": (io.BytesIO(b""), "")},
    )


def test_a_paste_as_large_as_the_upload_limit_is_accepted(ana, course):
    client, token = ana
    defined = "def q_grads(a, b, v):\n    return a\n"
    code = defined + "#" * (LIMIT - len(defined) - 1) + "\n"
    assert len(code.encode()) == LIMIT and len(code) > 500_000  # beyond Werkzeug's own 500 kB
    reply = paste(client, token, code)
    assert reply.status_code == 303 and "/courses/pytorch/submissions/" in reply.headers["Location"]
    assert stored(course) == 1


def test_a_paste_over_the_limit_is_refused_with_the_limit_and_kept(ana, course):
    client, token = ana
    code = "x = 'kept'\n" + "#" * (LIMIT - 11) + "\n"
    assert len(code.encode()) == LIMIT + 1
    reply = paste(client, token, code)
    # back to the exercise's page, whose script puts the code back to be cut down
    # (tests/browser/test_session_ended.py)
    assert reply.status_code == 303 and reply.headers["Location"].endswith("?kept=1")
    assert "The pasted code is larger than 1024 KB." in client.get(reply.headers["Location"]).text
    spanish = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions?lang=es",
        data={"csrf_token": token, "code": code, "file": (io.BytesIO(b""), "")},
    )
    assert "El código pegado supera los 1024 KB." in client.get(spanish.headers["Location"]).text
    far_over = paste(client, token, "#" * (2 * LIMIT))  # still read: back with the limit
    assert "supera los 1024 KB" in client.get(far_over.headers["Location"]).text
    beyond_reading = paste(client, token, "#" * (33 * LIMIT))  # over the cap: not even parsed
    assert beyond_reading.status_code == 303
    assert "supera los 1024 KB" in client.get(beyond_reading.headers["Location"]).text  # in Spanish
    assert stored(course) == 0


# deeper than Python's JSON parser can recurse (about 1000 levels), and well within it
NESTED = {
    "list": "[" * 100_000 + "]" * 100_000,
    "object": '{"a": ' * 5_000 + "1" + "}" * 5_000,
    "shallow": "[" * 500 + "]" * 500,
}


@pytest.mark.parametrize("shape", NESTED)
def test_json_nested_at_any_depth_is_a_json_400(api, course, shape):
    client, headers = api
    for path, said in [
        ("/api/v1/tokens", "'username' and 'password'"),
        ("/api/v1/submissions", "multipart"),
    ]:
        reply = client.post(
            path, headers=headers, data=NESTED[shape], content_type="application/json"
        )
        assert reply.status_code == 400 and reply.is_json and said in reply.json["error"], path
    assert stored(course) == 0
