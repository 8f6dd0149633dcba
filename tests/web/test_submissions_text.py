"""What a submission says of itself: its syntax checked without the compiler's warnings, code
pasted into the form told from a file of any name, and its notes as whole sentences in the
reader's language, with nothing of the student's that would drive a terminal."""

import io
import re
import warnings
from html import unescape

import pytest
from helpers import REFERENCE_Q, grade_next, logged_in, notebook
from sqlalchemy import select

from hpcgrade.summary import summary
from server.core.models import Submission
from server.web.submissions import PASTED, check_code

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

# "\d" in a plain string: the compiler warns (a DeprecationWarning, a SyntaxWarning from 3.12)
BACKSLASH_D = 'import re\n\nDIGITS = re.compile("\\d+")\n'
ESCAPES = "\x1b[2J\x1b]0;owned\x07"  # clear the screen, set the window's title


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))


def test_the_syntax_check_is_quiet_and_accepts_what_only_warns():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("error")  # as `python -W error` runs the portal
        check_code("work.py", BACKSLASH_D)
        check_code("work.ipynb", notebook(BACKSLASH_D))
    assert seen == []


def test_a_file_named_like_pasted_code_keeps_its_name(course):
    client, token = logged_in(course)
    reply = {}
    for name, data in [
        ("pasted", {"code": REFERENCE_Q}),
        ("pasted.py", {"file": (io.BytesIO(REFERENCE_Q.encode()), "pasted.py")}),
    ]:
        reply[name] = client.post(
            "/courses/pytorch/exercises/autograd-q/submissions", data={"csrf_token": token, **data}
        )
        assert reply[name].status_code == 303
    api = course.test_client()
    bearer = api.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    sent = api.post(
        "/api/v1/submissions",
        headers={"Authorization": f"Bearer {bearer.json['token']}"},
        data={"exercise": "autograd-q", "file": (io.BytesIO(REFERENCE_Q.encode()), PASTED)},
    )
    assert sent.status_code == 202
    with course.extensions["hpcgrade.db"].sessions() as session:
        names = list(session.scalars(select(Submission.filename).order_by(Submission.id)))
    assert names == [PASTED, "pasted.py", "pasted.py"]  # a client's folders are dropped
    assert "The code submitted (pasted code)" in text_of(
        client.get(reply["pasted"].headers["Location"]).text
    )
    uploaded = text_of(client.get(reply["pasted.py"].headers["Location"]).text)
    assert "The code submitted (pasted.py)" in uploaded and "pasted code" not in uploaded
    listed = client.get("/courses/pytorch/exercises/autograd-q").text
    assert '<td class="col-title">pasted code</td>' in listed
    assert '<td class="col-title">pasted.py</td>' in listed


def test_a_notebooks_notes_are_whole_sentences_in_the_readers_language(course, executor, catalogue):
    client, token = logged_in(course, lang="es")
    sent = client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={
            "csrf_token": token,
            "file": (
                io.BytesIO(
                    notebook(
                        "%matplotlib inline\nimport torch",
                        "!ls\n%pwd\nx = 1",
                        "raise ValueError('no')",
                        REFERENCE_Q,
                    ).encode()
                ),
                "work.ipynb",
            ),
        },
    )
    assert grade_next(course.extensions["hpcgrade.db"], executor, catalogue)[1] == "graded"
    page = client.get(sent.headers["Location"]).text
    text = text_of(page)
    assert "Nota: en celda 1 no se ejecutó la línea de IPython 1." in text
    assert "Nota: en celda 2 no se ejecutaron las líneas de IPython 1, 2." in text
    assert "Nota: celda 3, línea 1 lanzó ValueError: no" in text
    assert re.search(r'Nota: <a href="#line-3-1">celda 3, línea 1</a> lanzó', page)


def report(notes: list[dict], output: str = "") -> dict:
    return {
        "exercise": "autograd-q",
        "status": "graded",
        "score": 0,
        "max_score": 10,
        "checks": [],
        "notes": notes,
        "output": output,
    }


def test_the_terminal_says_notes_as_whole_sentences_in_the_reports_language():
    notes = [
        {"kind": "neutralised", "cell": "cell 1", "lines": [1]},
        {"kind": "neutralised", "cell": "cell 2", "lines": [1, 3]},
        {
            "kind": "cell-error",
            "cell": "cell 3",
            "type": "NameError",
            "message": "name 'x' is not defined",
            "frames": [{"file": "cell 3", "line": 2}],
        },
    ]
    said = summary("work.ipynb", report(notes), "es")
    assert "Nota: en celda 1 no se ejecutó la línea de IPython 1." in said
    assert "Nota: en celda 2 no se ejecutaron las líneas de IPython 1, 3." in said
    assert "Nota: celda 3, línea 2 lanzó NameError: name 'x' is not defined" in said
    assert "Note: in cell 2, IPython lines 1, 3 were not run." in summary("w", report(notes), "en")


def test_the_terminal_says_advice_as_not_graded():
    advice = {
        "kind": "advice",
        "name": "one-backward",
        "message": "Call `backward()` on each loss.",
        "translations": {
            "en": {"message": "Call `backward()` on each loss."},
            "es": {"message": "Llama a `backward()` con cada pérdida."},
        },
    }
    assert "Advice, not graded: Call backward() on each loss." in summary(
        "w", report([advice]), "en"
    )


def test_the_terminal_gets_no_escape_sequence_from_the_students_text():
    said = summary(
        "work.ipynb",
        report(
            [
                {
                    "kind": "cell-error",
                    "cell": "cell 1",
                    "type": "ValueError",
                    "message": f"bad{ESCAPES}",
                    "frames": [],
                }
            ],
            output=f"loss 1.0{ESCAPES}\nloss\t0.5\n",
        ),
        "en",
    )
    assert "\x1b" not in said and "\x07" not in said
    assert "Note: cell 1 raised ValueError: bad[2J]0;owned" in said
    assert "    loss 1.0[2J]0;owned\n    loss\t0.5" in said
