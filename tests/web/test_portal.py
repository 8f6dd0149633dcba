"""The student pages: exercises, statement in two languages, upload, live status, history."""

import io

from helpers import REFERENCE_Q, logged_in


def test_student_flow(course):
    client, token = logged_in(course)
    index = client.get("/courses/pytorch/")
    assert "Gradients of a non-scalar function" in index.text and "20" in index.text
    spanish = client.get("/courses/pytorch/exercises/autograd-q?lang=es")
    assert (
        "Gradientes de una función no escalar" in spanish.text
        and "Enviar a corregir" in spanish.text
    )
    assert (
        "<code>Q.backward(gradient=v)</code>" in spanish.text
    )  # the statement's Markdown rendered
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    assert sent.status_code == 303
    page = client.get(sent.headers["Location"])
    assert (
        "en cola" in page.text
        and "posición en la cola" in page.text
        and 'data-waiting="yes"' in page.text
    )
    status = client.get(sent.headers["Location"] + "/status").json
    assert status == {
        "status": "queued",
        "queue_position": 1,
        "waiting_for_cluster": False,
        "held_by": None,
        "note": None,
        "score": None,
        "counted_score": None,
        "max_score": None,
        "estimate_seconds": None,
        "estimate": None,
        "stalled": False,
    }
    pasted = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    assert pasted.status_code == 303
    history = client.get("/courses/pytorch/submissions")
    assert history.text.count("Gradientes de una función no escalar") == 2


def test_refusals_are_shown_not_stored(course):
    client, token = logged_in(course)
    for data, message in [
        (
            {"file": (io.BytesIO(b"print(1)"), "work.txt")},
            "Upload a .py file or a Jupyter notebook",
        ),
        ({"file": (io.BytesIO(b"\x00\x01"), "work.py")}, "The file is binary"),
        ({"code": ""}, "Nothing was chosen: choose a file or paste your code."),
    ]:
        reply = client.post(
            "/courses/pytorch/exercises/autograd-q/submissions",
            data={"csrf_token": token, **data},
            follow_redirects=True,
        )
        assert message in reply.text
    too_big = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        follow_redirects=True,
        data={"csrf_token": token, "file": (io.BytesIO(b"#" * (2 << 20)), "big.py")},
    )
    assert "is larger than 1024 KB" in too_big.text
    assert client.get("/courses/pytorch/exercises/no-such-one").status_code == 404
    no_csrf = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions", data={"code": REFERENCE_Q}
    )
    assert no_csrf.status_code == 400
    assert "Nothing submitted yet" in client.get("/courses/pytorch/submissions").text


def test_another_students_submission_is_404(course):
    ana, token = logged_in(course, "ana")
    sent = ana.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    bea, _ = logged_in(course, "bea")
    assert bea.get(sent.headers["Location"]).status_code == 404
    assert bea.get(sent.headers["Location"] + "/status").status_code == 404


def test_pages_need_login(course):
    client = course.test_client()
    for path in (
        "/",
        "/courses/pytorch/exercises/autograd-q",
        "/courses/pytorch/submissions",
        "/courses/pytorch/submissions/1",
    ):
        reply = client.get(path)
        assert reply.status_code == 302 and "/login" in reply.headers["Location"]
