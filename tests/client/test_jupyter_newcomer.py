"""`%hpcgrade` and `hpcgrade check` as a newcomer meets them following the docs (issue 23): the
usage said once, a log-in with no standard input, a refused token, the report in HTML, its
heading, a cell that does not compile, an exercise the server cannot give."""

import builtins
import json

import pytest
from click.testing import CliRunner
from IPython.core.error import StdinNotImplementedError
from test_client_output import portal  # noqa: F401 - a fixture
from test_jupyter import REFERENCE, WRONG, _run, kernel  # noqa: F401 - a fixture

from hpcgrade import client_file
from hpcgrade.summary import summary_html
from worker.cli.main import main


def notebook(path, *sources: str):
    path.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {
                        "cell_type": "code",
                        "source": source,
                        "metadata": {},
                        "outputs": [],
                        "execution_count": None,
                    }
                    for source in sources
                ],
            }
        )
    )
    return path


@pytest.fixture
def shown(monkeypatch):
    """What the magic displays: each bundle of text/plain and text/html."""
    bundles = []
    monkeypatch.setattr("hpcgrade.magic.display", lambda bundle, raw: bundles.append(bundle))
    return bundles


def test_no_argument_prints_the_usage_once_and_no_exit_status(kernel, capsys):
    capsys.readouterr()
    assert kernel.run_cell("%hpcgrade").success
    said = capsys.readouterr()
    assert said.out.count("usage:") == 1 and "%hpcgrade submit" in said.out and said.err == ""
    for line in ("%hpcgrade check", "%hpcgrade grade autograd-q", "%hpcgrade check q --lang fr"):
        failed = kernel.run_cell(line)
        message = str(failed.error_in_exec)
        said = capsys.readouterr()
        assert message.count("usage:") == 1 and not message.startswith("2"), message
        assert "usage:" not in said.err.replace(message, ""), said.err  # argparse's own, gone


def test_login_with_no_standard_input_says_what_to_do(kernel, monkeypatch):
    def no_input(_prompt=""):
        raise StdinNotImplementedError(
            "raw_input was called, but this frontend does not support input requests."
        )

    monkeypatch.setattr(builtins, "input", no_input)
    monkeypatch.setattr("getpass.getpass", no_input)
    for line in (
        "%hpcgrade login --server http://127.0.0.1:9",
        "%hpcgrade login --server http://127.0.0.1:9 --username ana",
    ):
        failed = kernel.run_cell(line)
        assert type(failed.error_in_exec).__name__ == "UsageError"  # no traceback
        assert "no input" in str(failed.error_in_exec)
        assert "`hpcgrade login --server URL`" in str(failed.error_in_exec)
    monkeypatch.setattr("getpass.getpass", lambda _prompt: (_ for _ in ()).throw(EOFError))
    failed = kernel.run_cell("%hpcgrade login --server http://127.0.0.1:9 --username ana")
    assert "no input" in str(failed.error_in_exec)


def test_a_refused_token_says_to_log_in_again_in_jupyter_words(kernel, portal, monkeypatch):  # noqa: F811
    monkeypatch.delenv("HPCGRADE_TOKEN")
    client_file.save(portal, "forged")
    for line in ("%hpcgrade my-courses", "%hpcgrade check pytorch/autograd-q"):
        refused = str(kernel.run_cell(line).error_in_exec)
        assert "run `%hpcgrade login` again" in refused and "Authorization" not in refused


def test_the_check_is_html_in_a_notebook_with_the_result_pages_marks(kernel, capsys, shown):
    _run(kernel, WRONG, capsys)
    _run(kernel, "%hpcgrade check autograd-q", capsys)
    [bundle] = shown
    html, text = bundle["text/html"], bundle["text/plain"]
    assert "✘" in html and "✔" in html and "<code>grad-mismatch</code>" in html
    # the known wrong program's words (visible_mistakes.json), their inline Markdown rendered as
    # on the result page
    assert "<code>Q.sum()</code>" in html
    assert "grad-mismatch:" in text and "`" not in text and "<" not in text


def test_html_escapes_the_students_own_text():
    report = {
        "status": "graded",
        "exercise": "q",
        "score": 0,
        "max_score": 1,
        "checks": [
            {
                "title": "a **bold** title",
                "points": 0,
                "max_points": 1,
                "passed": False,
                "diagnostics": [
                    {
                        "code": "exception",
                        "message": "raised `<img src=x>`",
                        "hint": "see *why*",
                        "details": {},
                    }
                ],
            }
        ],
        "notes": [
            {
                "kind": "cell-error",
                "cell": "cell 1",
                "type": "ValueError",
                "message": "<script>alert(1)</script>",
                "frames": [],
            }
        ],
        "output": "<b>printed</b>\x1b[31m",
    }
    html = summary_html("<lab>.ipynb", report, "en")
    assert "<script>" not in html and "<b>printed" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "<code>&lt;img src=x&gt;</code>" in html
    assert "<strong>bold</strong>" in html and "<em>why</em>" in html
    assert "&lt;lab&gt;.ipynb" in html and "\x1b" not in html


def test_the_check_is_headed_with_the_notebooks_name_and_warns_of_a_cell_that_does_not_compile(
    kernel, capsys, shown, monkeypatch, tmp_path
):
    _run(kernel, REFERENCE, capsys)
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    _run(kernel, "%hpcgrade check autograd-q", capsys)
    assert "autograd-q — this notebook: 3 / 3" in shown[-1]["text/plain"]
    saved = notebook(
        tmp_path / "lab3.ipynb", "%load_ext hpcgrade", REFERENCE, "def plot(:\n    pass"
    )
    monkeypatch.setenv("JPY_SESSION_NAME", str(saved))
    _run(kernel, "%hpcgrade check autograd-q", capsys)
    text = shown[-1]["text/plain"]
    assert "autograd-q — lab3.ipynb: 3 / 3" in text and "this-notebook" not in text
    assert (
        "Warning: lab3.ipynb, cell 3, line 1 does not compile (invalid syntax): submitting "
        "this file would be refused."
    ) in text
    assert "does not compile" in shown[-1]["text/html"]


def test_the_command_line_check_warns_of_a_cell_that_does_not_compile(tmp_path):
    saved = notebook(tmp_path / "lab.ipynb", REFERENCE, "for i in range(3)\n    print(i)")
    checked = CliRunner().invoke(main, ["check", "autograd-q", str(saved)])
    assert checked.exit_code == 0, checked.output
    assert f"Warning: {saved}, cell 2, line 1 does not compile" in checked.output
    clean = notebook(
        tmp_path / "clean.ipynb", "%load_ext hpcgrade", REFERENCE, "%hpcgrade submit autograd-q"
    )
    checked = CliRunner().invoke(main, ["check", "autograd-q", str(clean)])
    assert "does not compile" not in checked.output and "not run" not in checked.output


def test_an_exercise_the_server_cannot_give_is_named(portal, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr("server.web.api.current_info", lambda _folder: None)
    work = tmp_path / "work.py"
    work.write_text(REFERENCE)
    refused = CliRunner().invoke(main, ["check", "pytorch/autograd-q", str(work)])
    assert "pytorch/autograd-q: no such exercise" in refused.output
