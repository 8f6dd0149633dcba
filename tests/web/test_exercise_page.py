"""The exercise list and page: oversized uploads answered with the limit (on the page, through the
API, and to a client that sends the whole body before it reads), points, attempts, deadline and
why an exercise is closed, the starter and support files and nothing else of the folder, course
order, dates in words, scores as "8 / 10"."""

import datetime as dt
import html
import io
import re
import socket
from pathlib import Path

import pytest
import sqlalchemy as sa
from helpers import COURSE_ORDER, REFERENCE_Q, logged_in, served_over_http, the_course

from server.core.catalogue import ExerciseConfigError, load_exercise_info
from server.core.exercises import sync_exercises
from server.core.models import Exercise, Submission
from server.web.app import UPLOAD_CAP_FACTOR

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

ROOT = Path(__file__).resolve().parents[2]
KB = 1 << 10
MB = 1 << 20
CAP = UPLOAD_CAP_FACTOR * 1024 * KB  # with MAX_UPLOAD_KB's default
TOO_LARGE = {
    "en": ("The file is larger than 1024 KB.", "Clear All Outputs"),
    "es": ("El archivo supera los 1024 KB.", "Clear All Outputs"),
}
PASTED = "def kept():\n    return 'the pasted code'\n"


@pytest.fixture
def ana(course):
    return logged_in(course)


def stored(app) -> int:
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalar(sa.select(sa.func.count()).select_from(Submission))


def change_exercise(app, slug: str, **values) -> None:
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        session.execute(sa.update(Exercise).where(Exercise.slug == slug).values(**values))
        session.commit()


def visible_text(page: str) -> str:
    """What a reader sees: no tags, no attributes (a <time datetime> may hold ISO)."""
    return html.unescape(re.sub(r"<[^>]*>", " ", page))


def upload(client, token, size: int, lang: str = "en"):
    return client.post(
        f"/courses/pytorch/exercises/autograd-q/submissions?lang={lang}",
        data={
            "csrf_token": token,
            "code": PASTED,
            "file": (io.BytesIO(b"x = 1\n" + b"#" * (size - 6)), "big.ipynb"),
        },
    )


# -- oversized uploads ------------------------------------------------------------------------

KEPT_PAGE = "/courses/pytorch/exercises/autograd-q?kept=1"


def back_to_the_form(client, reply) -> str:
    """A refused submission's answer: a redirect to the exercise's page (reloading it sends
    nothing again) that asks its script for what the form held; that page's text, the refusal
    said in the form's section."""
    assert reply.status_code == 303 and reply.headers["Location"].endswith(KEPT_PAGE)
    page = client.get(reply.headers["Location"])
    assert page.status_code == 200 and "/static/exercise.js" in page.text
    section = page.text.split('id="submit"', 1)[1].split("</section>", 1)[0]
    assert 'class="flash error"' in section
    return visible_text(section)


@pytest.mark.parametrize("lang", ["en", "es"])
@pytest.mark.parametrize("size", [1200 * KB, 20 * MB])
def test_an_oversized_file_gets_the_page_with_the_limit_and_the_pasted_code(
    ana, course, lang, size
):
    client, token = ana
    reply = upload(client, token, size, lang)
    limit, advice = TOO_LARGE[lang]
    text = back_to_the_form(client, reply)  # the pasted code put back there: tests/browser
    assert limit in text and advice in text
    assert stored(course) == 0


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_request_over_the_cap_is_read_to_its_end_then_answered(ana, course, lang):
    client, token = ana
    size = CAP + MB
    reply = client.post(
        f"/courses/pytorch/exercises/autograd-q/submissions?lang={lang}",
        data={"csrf_token": token, "code": PASTED, "file": (io.BytesIO(b"#" * size), "big.py")},
    )
    # over the cap the body is not parsed: back to the exercise, with the limit
    assert TOO_LARGE[lang][0] in back_to_the_form(client, reply)
    assert stored(course) == 0
    # ...and read to its end first, as a browser needs
    body = io.BytesIO(b"#" * size)
    client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        input_stream=body,
        content_length=size,
        content_type="multipart/form-data; boundary=x",
    )
    assert body.tell() == size


def test_a_client_that_sends_everything_before_reading_gets_the_answer(app):
    """A browser sends the whole body before it reads the answer: the server must read it, or
    closing the connection over unread data resets it ("connection reset" in Chromium)."""
    size = CAP + MB
    with served_over_http(app, threaded=True) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
            connection.sendall(
                b"POST /api/v1/submissions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
                b"Content-Type: multipart/form-data; boundary=x\r\n"
                + f"Content-Length: {size}\r\n\r\n".encode()
                + b"#" * size
            )
            reply = connection.makefile("rb").read()
    assert reply.startswith(b"HTTP/1.1 413")
    assert "The file is larger than 1024 KB." in reply.decode()


@pytest.mark.parametrize("size", [1200 * KB, 20 * MB, CAP + MB])
def test_the_api_answers_an_oversized_file_with_the_limit(course, size):
    client = course.test_client()
    token = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    headers = {"Authorization": f"Bearer {token.json['token']}"}
    for lang, (limit, advice) in TOO_LARGE.items():
        reply = client.post(
            f"/api/v1/submissions?lang={lang}",
            headers=headers,
            data={"exercise": "autograd-q", "file": (io.BytesIO(b"#" * size), "big.ipynb")},
        )
        assert reply.status_code == 413 and reply.is_json
        assert limit in reply.json["error"] and advice in reply.json["error"]
    assert stored(course) == 0


def test_nginx_lets_through_what_the_portal_reads():
    settings = (ROOT / "deploy" / "nginx" / "hpcgrade-proxy.conf").read_text()
    assert re.search(r"^client_max_body_size (\d+)m;", settings, re.M).group(1) == str(CAP // MB)


# -- the exercise page ------------------------------------------------------------------------


def test_the_page_shows_points_attempts_deadline_and_files(ana, course):
    client, _token = ana
    now = dt.datetime.now(dt.timezone.utc)
    change_exercise(course, "autograd-q", deadline=now + dt.timedelta(days=3, hours=1))
    page = client.get("/courses/pytorch/exercises/autograd-q")
    text = visible_text(page.text)
    assert "<title>Gradients of a non-scalar function · hpcgrade</title>" in page.text
    assert (
        page.text.count("Gradients of a non-scalar function</h1>") == 1
    )  # the statement's own is dropped
    assert re.search(r"Points\s+10\b", text) and re.search(r"Attempts left\s+20 of 20", text)
    assert "due in 3 days" in text
    assert (now + dt.timedelta(days=3, hours=1)).strftime("%-d %b %Y") in text
    assert 'href="/courses/pytorch/exercises/autograd-q/files/starter.py"' in page.text
    assert "support.py" not in page.text  # autograd-q has none
    assert "If you choose a file and also paste code, the file is graded" in text
    assert 'href="/courses/pytorch/exercises/autograd-q/files/visible.py"' in page.text
    assert (
        "Check your work first with the visible checks (no attempt is used): in Jupyter, "
        "%load_ext hpcgrade then %hpcgrade check autograd-q ; in a terminal, "
        "hpcgrade check autograd-q work.py ."
    ) in " ".join(text.split())
    spanish = visible_text(client.get("/courses/pytorch/exercises/autograd-q?lang=es").text)
    assert (
        re.search(r"Intentos restantes\s+20 de 20", spanish) and "vence dentro de 3 días" in spanish
    )
    assert "en una terminal, hpcgrade check autograd-q work.py ." in " ".join(spanish.split())
    support = client.get("/courses/pytorch/exercises/autograd-accumulation").text
    assert (
        'href="/courses/pytorch/exercises/autograd-accumulation/files/support.py" '
        "download>exercise_support.py</a>"
    ) in support  # named as the code imports it


def test_a_closed_exercise_says_why_and_keeps_what_was_pasted(ana, course):
    client, token = ana
    form = client.get("/courses/pytorch/exercises/autograd-q").text  # opened before the deadline
    assert 'name="code"' in form
    yesterday = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)
    change_exercise(course, "autograd-q", deadline=yesterday, deadline_policy="refuse")
    page = client.get("/courses/pytorch/exercises/autograd-q")
    assert (
        "The deadline for this exercise passed" in page.text
        and "late work is not accepted" in page.text
    )
    assert 'name="code"' not in page.text and "Submit for grading" not in page.text
    late = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": PASTED},
    )
    # the code put back (read-only, to copy: it was not submitted) by the page's script
    assert "late work is not accepted" in back_to_the_form(client, late)
    assert 'class="kept-code" hidden' in client.get(KEPT_PAGE).text
    assert stored(course) == 0


def test_no_attempts_left_closes_the_form(ana, course):
    client, token = ana
    change_exercise(course, "autograd-q", max_attempts=2)
    for _ in range(2):
        sent = client.post(
            "/courses/pytorch/exercises/autograd-q/submissions",
            data={"csrf_token": token, "code": REFERENCE_Q},
        )
        assert sent.status_code == 303
    page = client.get("/courses/pytorch/exercises/autograd-q")
    text = visible_text(page.text)
    assert "You have used all 2 attempts for this exercise." in text
    assert re.search(r"Attempts left\s+0 of 2", text) and 'name="code"' not in page.text
    assert (
        "Has agotado los 2 intentos"
        in client.get("/courses/pytorch/exercises/autograd-q?lang=es").text
    )
    assert "0 of 2" in visible_text(client.get("/courses/pytorch/?lang=en").text)


def test_a_file_and_pasted_code_grade_the_file_and_say_so(ana, course):
    client, token = ana
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        follow_redirects=True,
        data={
            "csrf_token": token,
            "code": PASTED,
            "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py"),
        },
    )
    assert "The file work.py was graded; the pasted code was not." in sent.text
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        assert session.scalar(sa.select(Submission.filename)) == "work.py"
    alone = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        follow_redirects=True,
        data={"csrf_token": token, "file": (io.BytesIO(REFERENCE_Q.encode()), "work.py")},
    )
    assert alone.status_code == 200 and "pasted code was not" not in alone.text


def test_refused_code_stays_in_the_form(ana, course):
    client, token = ana
    reply = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": PASTED, "file": (io.BytesIO(b"x = 1"), "work.txt")},
    )
    assert "Upload a .py file" in back_to_the_form(client, reply)
    again = client.get(KEPT_PAGE)  # a reload: the page again, nothing sent
    assert again.status_code == 200 and stored(course) == 0


def test_only_the_starter_visible_checks_and_support_files_can_be_downloaded(ana, course):
    client, _token = ana
    starter = client.get("/courses/pytorch/exercises/autograd-q/files/starter.py")
    assert starter.status_code == 200
    assert starter.headers["Content-Disposition"] == "attachment; filename=autograd_q.py"
    assert starter.data == (ROOT / "exercises" / "autograd-q" / "starter.py").read_bytes()
    support = client.get("/courses/pytorch/exercises/autograd-accumulation/files/support.py")
    assert support.status_code == 200
    assert support.headers["Content-Disposition"] == "attachment; filename=exercise_support.py"
    visible = client.get("/courses/pytorch/exercises/autograd-q/files/visible.py")
    assert visible.data == (ROOT / "exercises" / "autograd-q" / "visible.py").read_bytes()
    for path in [
        "autograd-q/files/support.py",
        "autograd-q/files/checks.py",
        "autograd-q/files/reference.py",
        "autograd-q/files/exercise.toml",
        "autograd-q/files/statement.en.md",
        "autograd-q/files/mutants/plus_b_squared.py",
        "autograd-q/files/..%2Fautograd-q%2Fchecks.py",
        "no-such-one/files/starter.py",
    ]:
        assert client.get(f"/courses/pytorch/exercises/{path}").status_code == 404, path
    anonymous = course.test_client().get("/courses/pytorch/exercises/autograd-q/files/starter.py")
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]


# -- the list, history and every page: order, dates, scores, headers ------------------------------


def test_exercises_are_listed_in_course_order(ana):
    client, _token = ana
    page = client.get("/courses/pytorch/").text
    slugs = re.findall(r'href="/courses/pytorch/exercises/([a-z0-9-]+)"', page)
    assert slugs == COURSE_ORDER


def test_scores_read_out_of_the_maximum_and_dates_in_words(ana, course):
    client, token = ana
    client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.execute(sa.update(Submission).values(status="graded", score=8.0, max_score=10.0))
        session.commit()
    for path in [
        "/courses/pytorch/",
        "/courses/pytorch/exercises/autograd-q",
        "/courses/pytorch/submissions",
        "/courses/pytorch/?lang=es",
        "/courses/pytorch/submissions?lang=es",
    ]:
        page = client.get(path).text
        assert re.search(r">\s*8 / 10\s*<", page), path
        assert not re.search(r"\d{4}-\d\d-\d\d", visible_text(page)), path  # no raw ISO
        for table in re.findall(r"<table.*?</table>", page, re.S):
            assert "<th" in table, path


def test_course_order_is_validated_and_synced(tmp_path, db_session):
    folder = tmp_path / "ordered-one"
    folder.mkdir()
    for name in ("statement.en.md", "statement.es.md", "starter.py", "reference.py", "visible.py"):
        (folder / name).write_text("")
    (folder / "checks.py").write_text(
        "from worker.harness.checks import check\n\n"
        "@check('a', points=2, uses='f', en='a', es='a')\ndef a(ctx): pass\n\n"
        "@check('b', points=1.5, uses='f', en='b', es='b')\ndef b(ctx): pass\n\n"
        "def helper(): pass\n"
    )
    for order, message in [
        ('"first"', "order must be a whole number"),
        ("-1", "0 or more"),
        ("true", "order must be a whole number"),
        ("1.5", "whole number"),
    ]:
        (folder / "exercise.toml").write_text(
            f'title = {{ en = "x", es = "x" }}\norder = {order}\n'
        )
        with pytest.raises(ExerciseConfigError, match=message):
            load_exercise_info(folder)
    (folder / "exercise.toml").write_text('title = { en = "x", es = "x" }\norder = 30\n')
    info = load_exercise_info(folder)
    assert (info.order, info.max_points) == (30, 3.5)
    sync_exercises(db_session, the_course(db_session), {info.slug: info})
    row = db_session.scalar(sa.select(Exercise).where(Exercise.slug == "ordered-one"))
    assert row.position == 30


@pytest.mark.parametrize(
    "source",
    [
        "POINTS = 2\n@check('a', points=POINTS, uses='f', en='a', es='a')\ndef a(ctx): pass\n",
        "@check('a', uses='f', en='a', es='a')\ndef a(ctx): pass\n",
        "def a(ctx):\n    return (\n",
    ],
)
def test_maximum_points_not_written_as_numbers_are_not_known(tmp_path, source):
    """checks.py is read, never run: points given by a name are unknown (the pages then use the
    grader's maximum), and the exercise still loads for sync and the workers."""
    folder = tmp_path / "pointed-one"
    folder.mkdir()
    for name in ("statement.en.md", "statement.es.md", "starter.py", "reference.py", "visible.py"):
        (folder / name).write_text("")
    (folder / "exercise.toml").write_text('title = { en = "x", es = "x" }\n')
    (folder / "checks.py").write_text("raise SystemExit('imported')\n" + source)  # line 1
    assert load_exercise_info(folder).max_points is None


def test_every_course_exercise_has_its_maximum(catalogue):
    maxima = {slug: info.max_points for slug, info in catalogue.items()}
    assert maxima == {
        **dict.fromkeys(COURSE_ORDER, 10),
        "tensors-reshape": 12,
        "conv2d-einsum": 11,
    }  # a bonus point for speed
