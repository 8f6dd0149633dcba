"""`hpcgrade check` and the IPython extension, in an IPython shell as a student's kernel runs it."""

import json
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner
from helpers import SECOND_COURSE, second_edition, served_over_http
from IPython.core.interactiveshell import InteractiveShell
from sqlalchemy import delete
from test_client_output import graded_at_once, portal  # noqa: F401 - a fixture

from hpcgrade.service import IN_JUPYTER, Service, ServiceError
from hpcgrade.service import REFUSED as REFUSED_KIND
from hpcgrade.terminal import NOT_LOGGED_IN, REFUSED
from hpcgrade.visible import exercise_files
from server.core.catalogue import default_root
from server.core.models import ApiToken
from worker.cli.main import main

REFERENCE = (default_root() / "autograd-q" / "reference.py").read_text()
WRONG = REFERENCE.replace("gradient=v", "gradient=torch.ones_like(v)")


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """A fresh IPython shell with the extension loaded, working in tmp_path."""
    monkeypatch.chdir(tmp_path)
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
    kernel, capsys, portal, monkeypatch, tmp_path
):  # noqa: F811
    monkeypatch.setattr("hpcgrade.visible.default_root", lambda: tmp_path / "none")
    _run(kernel, REFERENCE, capsys)
    out = _run(kernel, "%hpcgrade check autograd-q", capsys)
    assert "✔" in out and "✘" not in out
    assert "neutralised" not in out and "not run" not in out  # its own lines are left out


@pytest.mark.postgresql_only
def test_submit_sends_the_kernels_notebook_and_shows_the_grade(
    kernel, capsys, portal, monkeypatch, tmp_path, harness
):  # noqa: F811
    notebook = tmp_path / "práctica 1.ipynb"  # sent as UTF-8, as a browser sends it
    notebook.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {
                        "cell_type": "code",
                        "source": REFERENCE,
                        "metadata": {},
                        "outputs": [],
                        "execution_count": 1,
                    }
                ],
            }
        )
    )
    from server.core.catalogue import load_exercise_info

    info = load_exercise_info(default_root() / "autograd-q")
    report = harness.report_for(info.job(notebook, seed=1))
    monkeypatch.setattr("server.web.api.enqueue", graded_at_once(report))
    monkeypatch.setattr("hpcgrade.service.POLL_SECONDS", 0.05)
    monkeypatch.setenv("JPY_SESSION_NAME", str(notebook))
    out = _run(kernel, "%hpcgrade submit autograd-q", capsys)
    assert f"{portal}/courses/pytorch/submissions/" in out and "práctica 1.ipynb: 10 / 10" in out
    page = re.search(r"/courses/pytorch/submissions/(\d+)", out).group(1)
    stored = Service().get(f"/api/v1/submissions/{page}")
    assert stored["filename"] == "práctica 1.ipynb"


@pytest.mark.postgresql_only
def test_login_keeps_a_token_that_submit_then_uses(kernel, capsys, portal, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.delenv("HPCGRADE_TOKEN")
    monkeypatch.setattr("getpass.getpass", lambda _prompt: "long-password")
    out = _run(kernel, f"%hpcgrade login --server {portal} --username ana", capsys)
    assert f"logged in to {portal} as ana" in out
    kept = (tmp_path / "client.toml").read_text()
    assert f'server = "{portal}"' in kept and f'\n"{portal}" = ' in kept
    assert Service().get("/api/v1/exercises")["exercises"]
    monkeypatch.setattr("getpass.getpass", lambda _prompt: "wrong")
    assert "wrong username or password" in str(
        kernel.run_cell("%hpcgrade login --username ana").error_in_exec
    )


@pytest.mark.postgresql_only
def test_a_saved_token_the_server_no_longer_takes_says_to_log_in_again(
    kernel, capsys, portal, course, monkeypatch, tmp_path
):  # noqa: F811
    monkeypatch.delenv("HPCGRADE_TOKEN")
    monkeypatch.setattr("getpass.getpass", lambda _prompt: "long-password")
    _run(kernel, f"%hpcgrade login --server {portal} --username ana", capsys)
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.execute(delete(ApiToken))  # as a change of password does
        session.commit()
    (tmp_path / "q.ipynb").write_text("{}")
    refused = str(kernel.run_cell("%hpcgrade submit autograd-q q.ipynb").error_in_exec)
    assert "your saved token is no longer valid" in refused and "%hpcgrade login" in refused
    monkeypatch.setenv("HPCGRADE_TOKEN", "forged")
    refused = str(kernel.run_cell("%hpcgrade submit autograd-q q.ipynb").error_in_exec)
    assert "the token in HPCGRADE_TOKEN is not valid" in refused


def test_an_exercise_in_two_courses_is_named_with_its_course_in_jupyter(
    kernel, capsys, portal, course, tmp_path
):  # noqa: F811
    second_edition(course, tmp_path / "exercises")
    notebook = tmp_path / "q.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {},
                "cells": [
                    {
                        "cell_type": "code",
                        "source": REFERENCE,
                        "metadata": {},
                        "outputs": [],
                        "execution_count": 1,
                    }
                ],
            }
        )
    )
    both = str(kernel.run_cell("%hpcgrade submit autograd-q q.ipynb").error_in_exec)
    assert both == (
        "exercise autograd-q is in several of your courses: name one, as "
        f"COURSE/autograd-q (pytorch, {SECOND_COURSE})\nname one: COURSE/EXERCISE, "
        "--course COURSE, or `%hpcgrade course COURSE` once for this notebook "
        "(`%hpcgrade my-courses` lists your courses)"
    )
    assert "not one of your courses" in str(kernel.run_cell("%hpcgrade course nope").error_in_exec)
    assert "names no course" in _run(kernel, "%hpcgrade course", capsys)
    assert f"for course {SECOND_COURSE}" in _run(
        kernel, f"%hpcgrade course {SECOND_COURSE}", capsys
    )
    out = _run(kernel, "%hpcgrade submit autograd-q q.ipynb --timeout 0", capsys)
    assert f"q.ipynb for {SECOND_COURSE}/autograd-q as saved" in out  # named once, for all
    out = _run(kernel, "%hpcgrade submit pytorch/autograd-q q.ipynb --timeout 0", capsys)
    assert "q.ipynb for pytorch/autograd-q as saved" in out  # a course named wins
    for named in (f"{SECOND_COURSE}/autograd-q", f"autograd-q --course {SECOND_COURSE}"):
        out = _run(kernel, f"%hpcgrade submit {named} q.ipynb --timeout 0", capsys)
        assert f"q.ipynb for {SECOND_COURSE}/autograd-q as saved" in out
        assert (
            "no grade after 0 s; the submission stays queued: "
            f"{portal}/courses/{SECOND_COURSE}/submissions/"
        ) in out
    listed = _run(kernel, "%hpcgrade my-courses", capsys)
    assert re.match(rf"{SECOND_COURSE} +student .*\npytorch +student ", listed)
    _run(kernel, REFERENCE, capsys)
    checked = _run(kernel, f"%hpcgrade check {SECOND_COURSE}/autograd-q", capsys)
    assert "✔" in checked and "✘" not in checked


def test_check_fetches_the_public_files_of_the_course_named(portal, course, tmp_path, monkeypatch):  # noqa: F811
    second_edition(course, tmp_path / "exercises")
    starter = tmp_path / "exercises" / "autograd-q" / "starter.py"
    starter.write_text(starter.read_text() + "# the 2027 edition's\n")
    folder, limits = exercise_files("autograd-q", tmp_path / "fetched", SECOND_COURSE)
    assert (
        folder == tmp_path / "fetched"
        and (folder / "starter.py").read_text() == starter.read_text()
    )  # the local folder is the other course's: not used
    monkeypatch.setattr("hpcgrade.visible.default_root", lambda: tmp_path / "none")
    with pytest.raises(ServiceError, match="several of your courses") as both:
        exercise_files("autograd-q", tmp_path / "again", None, IN_JUPYTER)
    assert both.value.kind == REFUSED_KIND and "%hpcgrade my-courses" in str(both.value)
    work = tmp_path / "work.py"
    work.write_text(WRONG)
    refused = CliRunner().invoke(main, ["check", "autograd-q", str(work)])
    assert refused.exit_code == REFUSED and "`hpcgrade my-courses`" in refused.output
    clash = CliRunner().invoke(
        main, ["check", "pytorch/autograd-q", str(work), "--course", SECOND_COURSE]
    )
    assert clash.exit_code == NOT_LOGGED_IN and "names another course" in clash.output


def test_submit_without_a_notebook_or_a_login_says_what_to_do(
    kernel, capsys, monkeypatch, tmp_path
):
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
    result = CliRunner().invoke(main, ["check", "autograd-q", str(work), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["status"] == "graded" and report["score"] < report["max_score"]
    monkeypatch.setattr("hpcgrade.visible.default_root", lambda: tmp_path / "none")
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("HPCGRADE_TOKEN", raising=False)
    monkeypatch.delenv("HPCGRADE_SERVER", raising=False)
    refused = CliRunner().invoke(main, ["check", "autograd-q", str(work)])
    assert refused.exit_code == NOT_LOGGED_IN and "hpcgrade login" in refused.output


def test_the_extension_needs_none_of_the_services_dependencies():
    """The course venv gets the package with --no-deps: Jupyter, torch and the standard library."""
    blocked = (
        "click",
        "requests",
        "flask",
        "flask_babel",
        "sqlalchemy",
        "celery",
        "psycopg",
        "alembic",
        "markdown",
    )
    code = (
        "import sys\nfor name in %r: sys.modules[name] = None\n"
        "import hpcgrade.magic, hpcgrade.visible\nprint('ok')" % (blocked,)
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=default_root().parent
    )
    assert done.stdout == "ok\n", done.stderr


def test_the_client_says_when_the_address_is_not_an_hpcgrade_server():
    """An HTML page is no answer, and a redirect to another host never gets the token."""
    from hpcgrade.service import UNREACHABLE, ServiceError

    def site(environ, start_response):
        if environ["PATH_INFO"] == "/away":
            start_response("302 Found", [("Location", "http://127.0.0.2:9/api/v1/exercises")])
            return [b""]
        start_response("200 OK", [("Content-Type", "text/html")])
        return [b"<html>a university's home page</html>"]

    with served_over_http(site) as url:
        service = Service(url, token="secret")
        for path, said in [
            ("/api/v1/exercises", "did not answer as an hpcgrade server does"),
            ("/away", "redirects to another place"),
        ]:
            with pytest.raises(ServiceError, match=said) as refused:
                service.get(path)
            assert refused.value.kind == UNREACHABLE
