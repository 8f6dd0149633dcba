"""The student pages: exercises, statement in two languages, upload, live status, history."""
import io
import re

import pytest

from helpers import REFERENCE_Q


@pytest.fixture
def browser(course):
    return course.test_client


def logged_in(make_client, username="ana"):
    client = make_client()
    token = re.search(r'name="csrf_token" value="([^"]+)"', client.get("/login").text).group(1)
    assert client.post("/login", data={"username": username, "password": "long-password",
                                       "csrf_token": token}).status_code == 302
    # logging in starts a new session, and with it a new CSRF token
    return client, re.search(r'name="csrf_token" value="([^"]+)"', client.get("/").text).group(1)


def test_student_flow(browser):
    client, token = logged_in(browser)
    index = client.get("/")
    assert "Gradients of a non-scalar function" in index.text and "20" in index.text
    spanish = client.get("/exercises/autograd-q?lang=es")
    assert "Gradientes de una función no escalar" in spanish.text and "Enviar a corregir" in spanish.text
    assert "<code>Q.backward(gradient=v)</code>" in spanish.text  # the statement's Markdown rendered
    sent = client.post("/exercises/autograd-q/submissions", data={
        "csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")})
    assert sent.status_code == 303
    page = client.get(sent.headers["Location"])
    assert "en cola" in page.text and "posición en la cola" in page.text and "data-waiting=\"yes\"" in page.text
    status = client.get(sent.headers["Location"] + "/status").json
    assert status == {"status": "queued", "queue_position": 1, "waiting_for_cluster": False,
                      "note": None, "score": None, "counted_score": None, "max_score": None}
    pasted = client.post("/exercises/autograd-q/submissions", data={"csrf_token": token,
                                                                   "code": REFERENCE_Q})
    assert pasted.status_code == 303
    history = client.get("/submissions")
    assert history.text.count("Gradientes de una función no escalar") == 2


def test_refusals_are_shown_not_stored(browser, app):
    client, token = logged_in(browser)
    for data, message in [
        ({"file": (io.BytesIO(b"print(1)"), "work.txt")}, "Upload a .py file or a Jupyter notebook"),
        ({"file": (io.BytesIO(b"\x00\x01"), "work.py")}, "The file is binary"),
        ({"code": ""}, "The file is empty"),
    ]:
        reply = client.post("/exercises/autograd-q/submissions", data={"csrf_token": token, **data},
                            follow_redirects=True)
        assert message in reply.text
    too_big = client.post("/exercises/autograd-q/submissions", follow_redirects=True, data={
        "csrf_token": token, "file": (io.BytesIO(b"#" * (2 << 20)), "big.py")})
    assert "is larger than 1024 KB" in too_big.text
    assert client.get("/exercises/no-such-one").status_code == 404
    no_csrf = client.post("/exercises/autograd-q/submissions", data={"code": REFERENCE_Q})
    assert no_csrf.status_code == 400
    assert "Nothing submitted yet" in client.get("/submissions").text


def test_another_students_submission_is_404(browser):
    ana, token = logged_in(browser, "ana")
    sent = ana.post("/exercises/autograd-q/submissions", data={"csrf_token": token,
                                                              "code": REFERENCE_Q})
    bea, _ = logged_in(browser, "bea")
    assert bea.get(sent.headers["Location"]).status_code == 404
    assert bea.get(sent.headers["Location"] + "/status").status_code == 404


def test_pages_need_login(browser):
    client = browser()
    for path in ("/", "/exercises/autograd-q", "/submissions", "/submissions/1"):
        reply = client.get(path)
        assert reply.status_code == 302 and "/login" in reply.headers["Location"]
