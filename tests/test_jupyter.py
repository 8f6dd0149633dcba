"""`hpcgrade check` and the IPython extension, in an IPython shell as a student's kernel runs it."""
import json
import subprocess
import sys

import pytest
from click.testing import CliRunner
from IPython.core.interactiveshell import InteractiveShell

from server.catalogue import default_root
from server.client import NOT_LOGGED_IN, check
from test_client_output import graded_at_once, portal  # noqa: F401 - a fixture

REFERENCE = (default_root() / "autograd-q" / "reference.py").read_text()
WRONG = REFERENCE.replace("gradient=v", "gradient=torch.ones_like(v)")


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A fresh IPython shell with the extension loaded, working in tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext hpcgrade").success
    yield shell
    InteractiveShell.clear_instance()


def _run(shell, code: str, capsys) -> str:
    capsys.readouterr()
    result = shell.run_cell(code, store_history=True)  # as a kernel runs a cell
    assert result.error_before_exec is None
    return capsys.readouterr().out


def test_check_runs_the_visible_checks_on_what_the_kernel_defined(kernel, capsys):
    _run(kernel, WRONG, capsys)
    wrong = _run(kernel, "%hpcgrade check autograd-q", capsys)
    assert "✘" in wrong and "grad-mismatch" in wrong
    _run(kernel, REFERENCE, capsys)  # the function defined again, as a student fixes a cell
    right = _run(kernel, "%hpcgrade check autograd-q --lang es", capsys)
    assert "✘" not in right and "✔" in right


@pytest.mark.postgresql_only
def test_check_fetches_the_public_files_from_the_server_without_a_local_folder(
        kernel, capsys, portal, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setattr("hpcgrade.visible.default_root", lambda: tmp_path / "none")
    _run(kernel, REFERENCE, capsys)
    out = _run(kernel, "%hpcgrade check autograd-q", capsys)
    assert "✔" in out and "✘" not in out
    fetched = tmp_path / "cache" / "hpcgrade" / "exercises" / "autograd-q"
    assert sorted(p.name for p in fetched.iterdir()) == ["starter.py", "visible.py"]


@pytest.mark.postgresql_only
def test_submit_sends_the_kernels_notebook_and_shows_the_grade(
        kernel, capsys, portal, monkeypatch, tmp_path, harness):  # noqa: F811
    notebook = tmp_path / "q.ipynb"
    notebook.write_text(json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": REFERENCE, "metadata": {}, "outputs": [],
         "execution_count": 1}]}))
    from server.catalogue import load_exercise_info
    report = harness.grade(load_exercise_info(default_root() / "autograd-q").job(notebook, seed=1))
    monkeypatch.setattr("server.api.enqueue", graded_at_once(report))
    monkeypatch.setattr("hpcgrade.magic.POLL_SECONDS", 0.05)
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    out = _run(kernel, "%hpcgrade submit autograd-q", capsys)
    assert f"{portal}/submissions/" in out and "q.ipynb: 10 / 10" in out


def test_submit_without_a_notebook_or_a_login_says_what_to_do(kernel, capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    result = kernel.run_cell("%hpcgrade submit autograd-q")
    assert "give its file" in str(result.error_in_exec)
    (tmp_path / "q.ipynb").write_text("{}")
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    result = kernel.run_cell("%hpcgrade submit autograd-q q.ipynb")
    assert "hpcgrade login" in str(result.error_in_exec)
    assert "usage" in str(kernel.run_cell("%hpcgrade grade autograd-q").error_in_exec)


def test_the_command_line_check_prints_the_same_report(tmp_path, monkeypatch):
    work = tmp_path / "work.py"
    work.write_text(WRONG)
    result = CliRunner().invoke(check, ["autograd-q", str(work), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["status"] == "graded" and report["score"] < report["max_score"]
    monkeypatch.setattr("hpcgrade.visible.default_root", lambda: tmp_path / "none")
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    monkeypatch.delenv("HPCGRADE_SERVER", raising=False)
    refused = CliRunner().invoke(check, ["autograd-q", str(work)])
    assert refused.exit_code == NOT_LOGGED_IN and "hpcgrade login" in refused.output


def test_the_extension_needs_none_of_the_services_dependencies():
    """The course venv gets the package with --no-deps: Jupyter, torch and the standard library."""
    blocked = ("click", "requests", "flask", "flask_babel", "sqlalchemy", "celery", "psycopg",
               "alembic", "markdown")
    code = ("import sys\nfor name in %r: sys.modules[name] = None\n"
            "import hpcgrade.magic, hpcgrade.visible\nprint('ok')" % (blocked,))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=default_root().parent)
    assert done.stdout == "ok\n", done.stderr
