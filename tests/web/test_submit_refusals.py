"""A submission refused before it uses an attempt (a file that defines none of the exercise's
functions, nothing chosen), on the page and through the API; a form sent after its session
ended comes back, after logging in, to the exercise's page, never to the form's address."""

import io
import json

import pytest
import sqlalchemy as sa
from helpers import REFERENCE_Q, log_in, logged_in

from server.core.models import Submission

pytestmark = pytest.mark.postgresql_only

SEND = "/courses/pytorch/exercises/autograd-q/submissions"
PAGE = "/courses/pytorch/exercises/autograd-q"
MISNAMED = "import torch\n\n\ndef q_grad(a, b, v):\n    return a, b\n"
NONE_OF_THEM = (
    "The code defines none of the functions this exercise asks for: q_grads. Define them with "
    "the names of the statement, at the top level of the file; nothing was graded and no "
    "attempt was used."
)


def stored(app) -> int:
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalar(sa.select(sa.func.count()).select_from(Submission))


def said_on_the_page(client, reply) -> str:
    assert reply.status_code == 303 and reply.headers["Location"].endswith(f"{PAGE}?kept=1")
    return client.get(reply.headers["Location"]).text


def notebook(code: str) -> bytes:
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "source": code}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4}).encode()


@pytest.mark.parametrize(
    "data",
    [
        {"code": MISNAMED},
        {"file": (io.BytesIO(MISNAMED.encode()), "work.py")},
        {"file": (io.BytesIO(notebook(MISNAMED)), "work.ipynb")},
    ],
    ids=["pasted", "file", "notebook"],
)
def test_a_file_defining_none_of_the_functions_uses_no_attempt(course, data):
    client, token = logged_in(course)
    page = said_on_the_page(client, client.post(SEND, data={"csrf_token": token, **data}))
    assert NONE_OF_THEM in page
    assert stored(course) == 0


def test_the_api_refuses_it_with_the_same_message(course):
    client = course.test_client()
    token = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    reply = client.post(
        "/api/v1/submissions",
        headers={"Authorization": f"Bearer {token.json['token']}"},
        data={"exercise": "autograd-q", "file": (io.BytesIO(MISNAMED.encode()), "work.py")},
    )
    assert reply.status_code == 400 and reply.json["error"] == NONE_OF_THEM
    assert stored(course) == 0


@pytest.mark.parametrize(
    "code",
    [
        # the grader says which is missing: one of them defined, or defined where it is not
        # found (inside another function), or possibly defined by code no reading can follow
        "def build():\n    def q_grads(a, b, v):\n        return a\n",
        "q_grads = lambda a, b, v: a\n",
        "from helpers import *\n",
        "globals()['q' + '_grads'] = print\n",
        REFERENCE_Q,
    ],
)
def test_code_that_may_define_one_of_them_is_graded(course, code):
    client, token = logged_in(course)
    reply = client.post(SEND, data={"csrf_token": token, "code": code})
    assert reply.status_code == 303 and "/courses/pytorch/submissions/" in reply.headers["Location"]
    assert stored(course) == 1


def test_nothing_chosen_is_said_so(course):
    client, token = logged_in(course)
    empty = {"csrf_token": token, "code": "", "file": (io.BytesIO(b""), "")}
    page = said_on_the_page(client, client.post(SEND, data=empty))
    assert "Nothing was chosen: choose a file or paste your code." in page
    assert "The file is empty" not in page
    empty_file = {"csrf_token": token, "file": (io.BytesIO(b""), "work.py")}
    assert "The file is empty." in said_on_the_page(client, client.post(SEND, data=empty_file))


def test_a_reload_after_a_refusal_is_the_exercises_page(course):
    client, token = logged_in(course)
    reply = client.post(SEND, data={"csrf_token": token, "code": "def q_grads(:\n"})
    for _ in range(2):  # the page, again: nothing sent a second time
        page = client.get(reply.headers["Location"])
        assert page.status_code == 200 and 'id="submit"' in page.text
    assert stored(course) == 0


def _back_after_logging_in(client, reply, lang: str = "en") -> str:
    """A form sent with no session: to the log-in page, with a word, then to the exercise."""
    assert reply.status_code == 303
    login = reply.headers["Location"]
    assert login.startswith("/login?next=") and "kept" in login
    said = {
        "en": "Your session ended: log in and send it again.",
        "es": "Tu sesión terminó: inicia sesión y envíalo de nuevo.",
    }[lang]
    assert said in client.get(login).text
    back = log_in(client, path=login)
    assert back.status_code == 302 and back.headers["Location"] == f"{PAGE}?kept=1"
    return client.get(back.headers["Location"]).text


def test_a_form_sent_after_logging_out_elsewhere_comes_back_to_the_exercise(course):
    client, token = logged_in(course)
    elsewhere, other_token = logged_in(course)
    elsewhere.post("/logout", data={"csrf_token": other_token})
    reply = client.post(
        SEND,
        data={"csrf_token": token, "code": REFERENCE_Q},
        headers={"Referer": f"http://localhost{PAGE}"},
    )
    page = _back_after_logging_in(client, reply)
    assert 'id="submit"' in page and "/static/exercise.js" in page
    assert stored(course) == 0


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_form_sent_without_its_cookie_comes_back_to_the_exercise(course, lang):
    _client, token = logged_in(course)
    cookieless = course.test_client()  # the browser's cookie gone: no CSRF session token
    if lang == "es":  # a cookie with the language chosen and nothing else
        cookieless.get("/login?lang=es")
    reply = cookieless.post(
        SEND,
        data={"csrf_token": token, "code": REFERENCE_Q},
        headers={"Referer": f"http://localhost{PAGE}"},
    )
    _back_after_logging_in(cookieless, reply, lang)
    assert stored(course) == 0
