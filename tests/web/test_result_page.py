"""The result page: a file that does not load is refused before it is queued or, when it loads
but defines nothing the checks call, said once at the top with the student's own file name and
line; the code with line numbers and the named line marked; the inline Markdown of titles,
diagnostics and hints; the live status; everything in the reader's language."""

import io
import json
import re
from html import unescape
from pathlib import Path

import pytest
from helpers import ONE_BACKWARD_PER_WINDOW, REFERENCE_Q, grade_next, logged_in, notebook
from sqlalchemy import func, select

from server.core.inline_markdown import to_terminal
from server.core.models import CheckResult, DiagnosticResult, GradingRun, Submission
from server.web.markup import to_html
from server.web.submissions import PASTED

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

NAME_ERROR_AT_IMPORT = (
    "import torch\n\nscale = undefined_name * 2\n\ndef q_grads(a, b, v):\n    return a, b\n"
)
# misnamed, and the right name defined only where the grader does not find it (a file that
# defines none of the exercise's functions is refused before it is queued)
MISNAMED = (
    "import torch\n\n\ndef q_grad(a, b, v):\n    return a, b\n\n\nif False:\n    q_grads = q_grad\n"
)
SYNTAX_ERROR = "import torch\n\ndef q_grads(a, b, v)\n    return a, b\n"
SIGN_FLIPPED = (
    Path(__file__).parents[2] / "exercises" / "autograd-q" / "mutants" / "plus_b_squared.py"
).read_text()


def send(client, token, code: str, filename: str | None = "work.py"):
    data = {"csrf_token": token}
    if filename is None:
        data["code"] = code
    else:
        data["file"] = (io.BytesIO(code.encode()), filename)
    return client.post("/courses/pytorch/exercises/autograd-q/submissions", data=data)


def stored(app) -> int:
    with app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalar(select(func.count()).select_from(Submission))


def graded_page(app, client, sent) -> str:
    assert sent.status_code == 303, sent.text
    assert (
        grade_next(
            app.extensions["hpcgrade.db"],
            app.extensions["test.executor"],
            app.extensions["test.catalogue"],
        )[1]
        == "graded"
    )
    return client.get(sent.headers["Location"]).text


@pytest.fixture
def grading(course, executor, catalogue):
    course.extensions["test.executor"], course.extensions["test.catalogue"] = executor, catalogue
    return course


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))


def marked_lines(page: str) -> list[str]:
    return re.findall(r'<li id="(line-\d+-\d+)" class="marked">', page)


# --- refused before it is queued -------------------------------------------------------------


@pytest.mark.parametrize(
    "lang, code, filename, said",
    [
        (
            "en",
            SYNTAX_ERROR,
            "work.py",
            "The code is not valid Python: expected &#39;:&#39; (work.py, line 3)",
        ),
        ("en", SYNTAX_ERROR, None, "(pasted code, line 3)"),
        (
            "es",
            SYNTAX_ERROR,
            None,
            "El código no es Python válido: expected &#39;:&#39; (código pegado, línea 3)",
        ),
        (
            "en",
            notebook("import torch", "def q_grads(a, b, v)\n    return a, b"),
            "work.ipynb",
            "(work.ipynb, cell 2, line 1)",
        ),
        (
            "es",
            notebook("import torch", "def q_grads(a, b, v)\n    return a, b"),
            "work.ipynb",
            "(work.ipynb, celda 2, línea 1)",
        ),
        ("en", '{"cells": [', "work.ipynb", "The notebook cannot be read: its JSON is damaged."),
        ("es", '{"cells": [', "work.ipynb", "No se puede leer el notebook: su JSON está dañado."),
        (
            "en",
            json.dumps({"cells": [{"cell_type": "markdown", "source": "# q_grads"}]}),
            "work.ipynb",
            "The notebook has no code in it.",
        ),
        ("en", "x = " + "-" * 100_000 + "1\n", "deep.py", "nested too deeply"),
    ],
)
def test_a_file_that_cannot_load_is_refused_stores_nothing_and_keeps_the_code(
    course, lang, code, filename, said
):
    client, token = logged_in(course, lang=lang)
    reply = send(client, token, code, filename)
    # back to the page, whose script puts pasted code back in the form (tests/browser)
    assert reply.status_code == 303 and reply.headers["Location"].endswith("?kept=1")
    assert said in client.get(reply.headers["Location"]).text
    assert stored(course) == 0


def test_the_api_refuses_a_syntax_error_with_the_line(course):
    client = course.test_client()
    token = client.post("/api/v1/tokens", json={"username": "ana", "password": "long-password"})
    reply = client.post(
        "/api/v1/submissions?lang=es",
        headers={"Authorization": f"Bearer {token.json['token']}"},
        data={"exercise": "autograd-q", "file": (io.BytesIO(SYNTAX_ERROR.encode()), "tarea.py")},
    )
    assert reply.status_code == 400
    assert "(tarea.py, línea 3)" in reply.json["error"] and "ningún intento" in reply.json["error"]
    assert stored(course) == 0


def test_notebook_magics_do_not_count_as_syntax_errors(course):
    client, token = logged_in(course)
    sent = send(client, token, notebook("%matplotlib inline\n!pip list", REFERENCE_Q), "work.ipynb")
    assert sent.status_code == 303 and stored(course) == 1


# --- said once, at the top -------------------------------------------------------------------


def test_an_error_while_loading_is_said_once_with_the_file_and_line_marked(grading):
    client, token = logged_in(grading)
    page = graded_page(grading, client, send(client, token, NAME_ERROR_AT_IMPORT, "work.py"))
    text = text_of(page)
    assert text.count("name 'undefined_name' is not defined") == 1
    assert "(work.py, line 3)" in text and "submission.py" not in page
    assert "(line 3) (line 3)" not in text and "line 3, line 3" not in text
    assert 'class="tag unloaded">did not load<' in page and 'class="tag graded"' not in page
    assert text.count("Not run: see why above.") == 4  # the four checks, no diagnostic under each
    assert page.index("The checks could not run") < page.index("a.grad = 9a²·v")
    assert marked_lines(page) == ["line-1-3"]
    assert '<a href="#line-1-3">work.py, line 3</a>' in page
    assert '<details class="card" open>' in page  # the code is shown, since a line is named
    # every line numbered (an ordered list), the named one marked for every reader
    assert page.count('<li id="line-1-') == NAME_ERROR_AT_IMPORT.count("\n")
    assert re.search(
        r'class="marked"><mark><span class="visually-hidden">Line named above: </span>'
        r"scale = undefined_name \* 2</mark>",
        page,
    )
    assert "0 / 10" in text and "0 / 3" in text


def test_a_misnamed_function_in_pasted_code_is_said_once_in_spanish(grading):
    client, token = logged_in(grading, lang="es")
    page = graded_page(grading, client, send(client, token, MISNAMED, None))
    text = text_of(page)
    assert page.count("<code>q_grads</code> no está definida.") == 1  # Markdown rendered, once
    assert "`" not in text  # no literal backtick anywhere in the result
    assert "(código pegado)" in text and PASTED not in page
    assert "no se pudo cargar" in text and "Las comprobaciones no se pudieron ejecutar" in text
    assert text.count("No se ejecutó: mira arriba el motivo.") == 4
    assert "El código entregado (código pegado)" in text
    assert marked_lines(page) == []


def test_a_graded_file_shows_checks_diagnostics_and_score_in_the_readers_language(grading):
    client, token = logged_in(grading, lang="es")
    page = graded_page(grading, client, send(client, token, SIGN_FLIPPED, "work.py"))
    text = text_of(page)
    assert re.search(r"\d+ / 10", text) and "3 / 3" in text
    assert "entradas 2-D" in text  # a check's title, translated
    assert "tiene el signo contrario al del gradiente esperado" in text
    assert '<span class="tag graded">corregida</span>' in page
    assert "The checks could not run" not in page and "Las comprobaciones no" not in page
    english = client.get(page_url(page) + "?lang=en").text
    assert "has the opposite sign of the expected gradient" in english


def page_url(page: str) -> str:
    return "/courses/pytorch/submissions/" + re.search(r"· #(\d+)</h1>", page).group(1)


def test_a_notebook_cell_that_raised_is_a_note_with_its_cell_and_line(grading):
    client, token = logged_in(grading, lang="es")
    page = graded_page(
        grading,
        client,
        send(
            client,
            token,
            notebook("import torch", "x = 1\nprint(undefined_name)", REFERENCE_Q),
            "work.ipynb",
        ),
    )
    text = text_of(page)
    assert "Nota: celda 2, línea 2 lanzó NameError" in text
    assert marked_lines(page) == ["line-2-2"]
    assert "10 / 10" in text and "celda 3" in text  # the code view names each cell


def test_advice_is_a_note_marked_not_graded_in_the_readers_language(grading):
    """autograd-accumulation's advice on a single backward() per window, on the result page."""
    client, token = logged_in(grading, lang="es")
    page = graded_page(
        grading,
        client,
        client.post(
            "/courses/pytorch/exercises/autograd-accumulation/submissions",
            data={
                "csrf_token": token,
                "file": (io.BytesIO(ONE_BACKWARD_PER_WINDOW.encode()), "w.py"),
            },
        ),
    )
    assert "10 / 10" in text_of(page)
    assert re.search(
        r'<p class="note">Consejo, no puntúa: Tu código llama a <code>backward\(\)</code> '
        r"una vez por ventana",
        page,
    )


# --- the live status -------------------------------------------------------------------------


def test_the_waiting_page_has_one_live_status_the_script_updates(course):
    client, token = logged_in(course, lang="es")
    sent = send(client, token, REFERENCE_Q)
    page = client.get(sent.headers["Location"]).text
    live = re.search(
        r'<span id="live" role="status" aria-live="polite">(.*?)</span></span>', page
    ).group(1)
    assert '<span class="tag queued">en cola</span>' in live
    assert '<span id="place"> · posición en la cola: 1' in live
    for state, label in [
        ("queued", "en cola"),
        ("running", "corrigiendo"),
        ("graded", "corregida"),
        ("error", "error del corrector"),
        ("cancelled", "cancelada"),
    ]:
        assert f'data-label-{state}="{label}"' in page
    assert re.search(r'data-label-running="corrigiendo"', page)
    script = client.get("/static/submission.js").text
    assert 'document.querySelector("#live .tag")' in script and "tag.className" in script
    with course.extensions["hpcgrade.db"].sessions() as session:  # a worker takes it
        session.get(Submission, int(sent.headers["Location"].rsplit("/", 1)[1])).status = "running"
        session.commit()
    status = client.get(sent.headers["Location"] + "/status").json
    assert status["status"] == "running" and status["queue_position"] is None
    running = client.get(sent.headers["Location"]).text
    assert '<span class="tag running">corrigiendo</span><span id="place"></span>' in running


# --- inline Markdown -------------------------------------------------------------------------


def test_inline_markdown_renders_code_and_emphasis_and_escapes_the_rest():
    assert (
        to_html("`q_grads` is *not* **defined**")
        == "<code>q_grads</code> is <em>not</em> <strong>defined</strong>"
    )
    hostile = (
        '<script>alert(1)</script> <img src=x onerror="alert(1)"> [here](javascript:alert(1)) '
        "<https://example.org> `<b>` **<i>x</i>**"
    )
    html = str(to_html(hostile))
    assert "<script" not in html and "<img" not in html and "<a" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "[here](javascript:alert(1))" in html
    assert "<code>&lt;b&gt;</code>" in html and "<strong>&lt;i&gt;x&lt;/i&gt;</strong>" in html
    assert to_html('`a" onmouseover="x`') == "<code>a&#34; onmouseover=&#34;x</code>"
    # arithmetic stays arithmetic; a span may hold a backtick; code inside emphasis
    assert to_html("3*a**2*v and a * b") == "3*a**2*v and a * b"
    assert (
        to_html("`` a`b `` and **`x`**") == "<code>a`b</code> and <strong><code>x</code></strong>"
    )
    assert to_html("unclosed `code and *star") == "unclosed `code and *star"
    assert to_html(None) == ""


def test_inline_markdown_for_a_terminal():
    assert to_terminal("`q_grads` is **not** defined", styled=False) == "q_grads is not defined"
    assert (
        to_terminal("`q_grads` is **not** defined", styled=True)
        == "\x1b[36mq_grads\x1b[39m is \x1b[1mnot\x1b[22m defined"
    )
    # a student's text cannot drive the terminal
    assert to_terminal("oops\x1b]0;pwned\x07\x1b[2J", styled=False) == "oops]0;pwned[2J"


# --- the line a hint names, marked ------------------------------------------------------------

LEAVES_THE_GRAPH = (
    "import torch\n\n\ndef q_grads(a, b, v):\n    with torch.no_grad():\n"
    "        q = 3 * a**3 - b**2\n    q.backward(v)\n    return a.grad, b.grad\n"
)


def test_the_code_view_marks_the_lines_the_hint_names(course):
    """A hint that names where the code leaves the graph (line 5's `torch.no_grad()`) has that
    line marked, not only the line its diagnostic's message names (line 7's backward())."""
    client, token = logged_in(course)
    sent = send(client, token, LEAVES_THE_GRAPH)
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        submission = session.scalar(select(Submission))
        run = GradingRun(
            submission=submission,
            attempt=1,
            executor="local",
            status="done",
            started_at=submission.submitted_at,
            lease_until=submission.submitted_at,
            finished_at=submission.submitted_at,
            score=0,
            max_score=3,
        )
        hint = "Your code leaves the graph here: line 5, `torch.no_grad()`: nothing is recorded."
        run.checks.append(
            CheckResult(
                position=0,
                name="grad-a",
                title="a.grad",
                points=0,
                max_points=3,
                passed=False,
                diagnostics=[
                    DiagnosticResult(
                        code="grad-none",
                        message="`a.grad` is None.",
                        hint=hint,
                        details={
                            "file": "submission.py",
                            "line": 7,
                            "left_at": [["no-grad", "submission.py", 5]],
                        },
                        translations={"en": {"message": "`a.grad` is None.", "hint": hint}},
                    )
                ],
            )
        )
        session.add(run)
        submission.status, submission.score, submission.max_score = "graded", 0, 3
    page = client.get(sent.headers["Location"]).text
    assert "line 5, <code>torch.no_grad()</code>" in page
    assert marked_lines(page) == ["line-1-5", "line-1-7"]
