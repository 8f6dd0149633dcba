"""Notebooks and bad input: a clear report or message, never a traceback from the grader."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REFERENCE_Q, codes, notebook

HPCGRADE = [sys.executable, "-m", "worker.cli"]


def test_notebook_magics_neutralised_and_raising_cells_noted(grade, tmp_path):
    marker = tmp_path / "shell-ran"
    report = grade(
        "autograd-q",
        notebook(
            "%matplotlib inline\n%pip install nothing\nimport torch",
            f"!touch {marker}\nfiles = !ls\nx = torch.ones(2)\nx?",
            "%%bash\ntouch " + str(marker),
            "%%time\ndef q_grads(a, b, v):\n    return a, b",
            "undefined_name + 1",
            REFERENCE_Q,
            "q_grads(torch.ones(2, requires_grad=True), torch.ones(2, requires_grad=True), torch.ones(2))",
        ),
        filename="work.ipynb",
    )
    assert report["score"] == report["max_score"]  # the last definition is graded
    assert not marker.exists()
    errors = [n for n in report["notes"] if n["kind"] == "cell-error"]
    assert [(n["cell"], n["type"]) for n in errors] == [("cell 5", "NameError")]
    neutralised = {n["cell"]: n["lines"] for n in report["notes"] if n["kind"] == "neutralised"}
    assert neutralised == {"cell 1": [1, 2], "cell 2": [1, 2, 4], "cell 3": [1, 2], "cell 4": [1]}


def test_notebook_markdown_and_list_sources(grade):
    nb = json.loads(notebook())
    nb["cells"] = [
        {"cell_type": "markdown", "source": ["# q_grads\n"], "metadata": {}},
        {
            "cell_type": "code",
            "source": REFERENCE_Q.splitlines(keepends=True),
            "metadata": {},
            "outputs": [],
        },
    ]
    report = grade("autograd-q", json.dumps(nb), filename="work.ipynb")
    assert report["score"] == report["max_score"]


def test_exception_reports_student_line(grade):
    report = grade(
        "autograd-q",
        "import torch\n\ndef q_grads(a, b, v):\n    x = 1\n    return a @ torch.ones(99)\n",
    )
    details = report["checks"][0]["diagnostics"][0]["details"]
    assert report["checks"][0]["diagnostics"][0]["code"] == "exception"
    assert details["line"] == 5 and details["file"] == "submission.py"


def test_unreadable_files(grade):
    cases = {
        "empty": (b"", "submission.py", "missing-function"),
        "binary": (b"\x7fELF\x00\x01\x02", "submission.py", "import-error"),
        "latin-1": (
            "def q_grads(a, b, v):\n    return 'año'\n".encode("latin-1"),
            "submission.py",
            "import-error",
        ),
        "ten megabytes": (b"# " + b"x" * (10 << 20), "submission.py", "import-error"),
        "syntax error": (b"def q_grads(a, b, v)\n    return a\n", "submission.py", "import-error"),
        "bad notebook": (b'{"cells": [', "work.ipynb", "import-error"),
        "not a notebook": (b'{"nbformat": 4}', "work.ipynb", "import-error"),
        "raises at import": (b"raise SystemExit(3)\n", "submission.py", "import-error"),
    }
    for name, (data, filename, code) in cases.items():
        report = grade("autograd-q", data, filename=filename)
        assert report["status"] == "graded", name
        assert report["score"] == 0, name
        assert codes(report) == {code}, (name, codes(report))
        assert report["checks"][0]["message"], name
        # said once, for the whole file, not again under every check
        assert [n["kind"] for n in report["notes"]].count("load-error") == 1, name
        assert all(c["diagnostics"] == [] for c in report["checks"]), name


def test_syntax_error_names_the_line_once(grade):
    report = grade("autograd-q", "import torch\n\ndef q_grads(a, b, v)\n    return a\n")
    (load_error,) = [n for n in report["notes"] if n["kind"] == "load-error"]
    assert load_error["details"]["line"] == 3 and load_error["details"]["file"] == "submission.py"
    # the line is a detail of its own, not repeated in the message as "(submission.py, line 3)"
    assert load_error["message"] == "The submission could not be loaded: SyntaxError: expected ':'"


def test_unreadable_notebook_is_said_in_each_language(grade):
    report = grade("autograd-q", b'{"cells": [', filename="work.ipynb")
    (load_error,) = [n for n in report["notes"] if n["kind"] == "load-error"]
    assert "not a valid Jupyter notebook" in load_error["translations"]["en"]["message"]
    assert "no es un notebook de Jupyter" in load_error["translations"]["es"]["message"]


def test_spanish_report(harness, tmp_path):
    from server.core.catalogue import default_root, load_exercise_info

    path = tmp_path / "s.py"
    path.write_text("")
    info = load_exercise_info(default_root() / "autograd-q")
    report = harness.report_for(info.job(path, lang="es")).to_dict()
    assert report["checks"][0]["message"] == "`q_grads` no está definida."
    assert report["checks"][0]["title"] == "a.grad = 9a²·v"
    assert report["notes"][0]["translations"]["en"]["message"] == "`q_grads` is not defined."


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        HPCGRADE + list(args),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )


@pytest.mark.sandbox  # `hpcgrade grade` starts a harness of its own
def test_cli_json_one_report_per_file(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.ipynb"
    good.write_text(REFERENCE_Q)
    bad.write_text("not json")
    result = run_cli("grade", "autograd-q", str(good), str(bad), "--json", "--seed", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    first, second = (json.loads(line) for line in lines)
    assert (first["score"], second["score"]) == (10, 0)
    assert (first["file"], second["file"]) == (str(good), str(bad))  # each names what it grades
    for report in (first, second):
        assert {
            "exercise",
            "status",
            "score",
            "max_score",
            "checks",
            "environment",
            "sandbox",
            "timing",
        } <= set(report)
        assert report["environment"]["torch"].startswith("2.")
    assert "seccomp" in first["sandbox"]["layers"]


def test_cli_errors_are_messages():
    unknown = run_cli("grade", "no-such-exercise", __file__)
    assert unknown.returncode == 2
    assert "unknown exercise 'no-such-exercise'; known: " in unknown.stderr
    assert "Traceback" not in unknown.stderr
    missing = run_cli("grade", "autograd-q", "/nonexistent.py")
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    no_python = run_cli("grade", "autograd-q", __file__, "--python", "/nonexistent/python")
    assert no_python.returncode == 1
    assert "the grader could not start: cannot run /nonexistent/python" in no_python.stderr
    assert "Traceback" not in no_python.stderr


def test_cli_lists_exercises():
    result = run_cli("exercises", "--json")
    slugs = [e["slug"] for e in json.loads(result.stdout)]
    assert "autograd-q" in slugs


def test_a_module_that_cannot_be_imported_is_named_in_the_hint(grade):
    """The support code keeps the name the exercise's code imports (`exercise_support`); a
    module the course's environment lacks is said so, in both languages."""
    support = grade("autograd-q", "import support\n" + REFERENCE_Q)
    (load_error,) = [n for n in support["notes"] if n["kind"] == "load-error"]
    assert "`import exercise_support`" in load_error["hint"]
    assert "`import exercise_support`" in load_error["translations"]["es"]["hint"]
    # a name no environment has (matplotlib was one, until the service's copydetect brought it)
    other = grade("autograd-q", "import plotting_nowhere.pyplot as plt\n" + REFERENCE_Q)
    (load_error,) = [n for n in other["notes"] if n["kind"] == "load-error"]
    assert "has no module `plotting_nowhere`" in load_error["hint"]
    assert "no tiene el módulo `plotting_nowhere`" in load_error["translations"]["es"]["hint"]


def test_a_correct_file_of_the_largest_size_accepted_gets_full_marks(grade):
    """Padded with functions it never calls to just under `submission_kb`: the grader's reading
    of the source (conv2d-einsum's rules) was made again for every value case, and spent the
    student's budget (3/11)."""
    from server.core.catalogue import default_root
    from worker.harness.jobs import Limits

    reference = (default_root() / "conv2d-einsum" / "reference.py").read_text()
    padding = "".join(
        f"def unused_{i}(x):\n    y = x * {i} + 1\n    return y - {i}\n\n"
        for i in range(Limits().submission_kb * 1024 // 60)
    )
    source = (reference + "\n" + padding)[: Limits().submission_kb * 1024 - 100]
    source = source[: source.rindex("\n\ndef ")] + "\n"
    report = grade("conv2d-einsum", source)
    assert (report["status"], report["score"]) == ("graded", report["max_score"]), [
        (c["name"], c["points"], [d["code"] for d in c["diagnostics"]]) for c in report["checks"]
    ]
