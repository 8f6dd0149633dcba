"""`hpcgrade submit` against the portal over HTTP: the web page's address, a result without
Markdown marks (styled only on a terminal that wants colour), and one exit status for each way
it can end."""

import datetime as dt
import io
import json
import re

import pytest
import sqlalchemy as sa
from click.testing import CliRunner
from helpers import REFERENCE_Q, SECOND_COURSE, second_edition, served_over_http

from hpcgrade import terminal as client
from hpcgrade.service import REFUSED as REFUSED_KIND
from hpcgrade.service import Service, ServiceError, log_in, on_server
from hpcgrade.summary import summary
from hpcgrade.terminal import (
    GRADED,
    NO_GRADE,
    NOT_LOGGED_IN,
    REFUSED,
    TIMED_OUT,
    UNREACHABLE,
    login,
    my_courses,
    submit,
)
from server.core.models import ApiToken, Submission
from server.core.runs import claim, record
from worker.harness.report import Report

MISNAMED = "import torch\n\n\ndef q_grad(a, b, v):\n    return a, b\n"


@pytest.fixture
def portal(course, tmp_path, monkeypatch):
    """The portal over HTTP, and a token of ana's in the environment; returns its URL."""
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "client.toml"))
    token = course.test_client().post(
        "/api/v1/tokens", json={"username": "ana", "password": "long-password"}
    )
    monkeypatch.setenv("HPCGRADE_TOKEN", token.json["token"])
    monkeypatch.setattr("hpcgrade.service.POLL_SECONDS", 0.05)
    with served_over_http(course) as url:
        monkeypatch.setenv("HPCGRADE_SERVER", url)
        yield url


def graded_at_once(report: Report):
    """An `enqueue` that grades each submission with this report as soon as it is queued."""

    def enqueue(_celery, session, ids):
        for submission_id in ids:
            claimed = claim(session, submission_id, "local", "test", dt.timedelta(minutes=5))
            assert record(session, claimed.run_id, report) == "graded"
        session.commit()

    return enqueue


def failed_at_once(_celery, session, ids):
    for submission_id in ids:
        session.get(Submission, submission_id).status = "error"
    session.commit()


def run_submit(
    tmp_path,
    code: str,
    *args: str,
    name: str = "work.py",
    env: dict | None = None,
    exercise: str = "autograd-q",
):
    work = tmp_path / name
    work.write_text(code)
    return CliRunner().invoke(submit, [exercise, str(work), *args], env=env)


@pytest.fixture(scope="module")
def misnamed_report(harness, tmp_path_factory):
    from server.core.catalogue import default_root, load_exercise_info

    path = tmp_path_factory.mktemp("misnamed") / "work.py"
    path.write_text(MISNAMED)
    info = load_exercise_info(default_root() / "autograd-q")
    return harness.report_for(info.job(path, seed=7, lang="es")).to_dict()


def test_a_graded_file_prints_the_page_and_the_result_without_markdown_marks(
    portal, monkeypatch, tmp_path, misnamed_report
):
    monkeypatch.setattr("server.web.api.enqueue", graded_at_once(Report.from_dict(misnamed_report)))
    # a file the portal takes (it defines q_grads), graded as the misnamed one was
    result = run_submit(tmp_path, MISNAMED.replace("q_grad(", "q_grads("), "--lang", "es")
    assert result.exit_code == GRADED, result.output
    assert re.search(rf"{portal}/courses/pytorch/submissions/\d+\n", result.stderr)
    assert "/api/" not in result.output
    out = result.stdout
    assert out.count("q_grads no está definida.") == 1 and "`" not in out  # said once, plainly
    assert "Las comprobaciones no se pudieron ejecutar" in out
    assert out.count("No se ejecutó: mira arriba el motivo.") == 4
    assert "0 / 10" in out and "(0 / 3)" in out and "\x1b[" not in out


def test_no_wait_prints_the_page_address(portal, tmp_path):
    result = run_submit(tmp_path, REFERENCE_Q, "--no-wait")
    assert result.exit_code == GRADED, result.output
    assert re.fullmatch(rf"{portal}/courses/pytorch/submissions/\d+", result.stdout.strip())
    as_json = json.loads(run_submit(tmp_path, REFERENCE_Q, "--no-wait", "--json").stdout)
    assert as_json["page"] == f"{portal}/courses/pytorch/submissions/{as_json['id']}"


def test_a_grader_error_is_its_own_exit_status(portal, monkeypatch, tmp_path):
    monkeypatch.setattr("server.web.api.enqueue", failed_at_once)
    result = run_submit(tmp_path, REFERENCE_Q)
    assert result.exit_code == NO_GRADE, result.output
    assert "this is not a grade" in result.stdout


def test_a_graded_answer_without_its_score_is_no_grade_not_a_traceback(
    portal, monkeypatch, tmp_path
):
    """A server that says graded and sends no score (an older or broken one) crashed the
    summary (`None:g`): it is said as no grade, with the exit status of one."""
    scoreless = {"status": "graded", "exercise": "autograd-q", "counted_score": None}
    monkeypatch.setattr("hpcgrade.terminal._wait_for_grade", lambda *args: dict(scoreless))
    result = run_submit(tmp_path, REFERENCE_Q)
    assert result.exit_code == NO_GRADE, result.output
    assert "(no score came with it); this is not a grade." in result.stdout
    assert "Traceback" not in result.output


def test_no_grade_within_the_timeout_is_its_own_exit_status(portal, tmp_path):
    result = run_submit(tmp_path, REFERENCE_Q, "--timeout", "1", "--lang", "es")
    assert result.exit_code == TIMED_OUT, result.output
    assert re.search(
        rf"la entrega sigue en la cola: {portal}/courses/pytorch/submissions/\d+", result.stderr
    )
    assert "en cola · posición en la cola: 1" in result.stderr  # the progress, in Spanish


def test_a_refused_file_is_its_own_exit_status_and_says_the_line(portal, tmp_path):
    result = run_submit(tmp_path, "def q_grads(a, b, v)\n    return a\n", name="mine.py")
    assert result.exit_code == REFUSED
    assert "The code is not valid Python: expected ':' (mine.py, line 1)" in result.stderr
    misnamed = run_submit(tmp_path, "def q_grad(a, b, v):\n    return a\n", name="mine.py")
    assert misnamed.exit_code == REFUSED
    assert "defines none of the functions this exercise asks for: q_grads." in misnamed.stderr
    unknown = CliRunner().invoke(submit, ["no-such", __file__])
    assert unknown.exit_code == REFUSED
    assert "no exercise no-such in your courses (pytorch)" in unknown.stderr


def test_not_logged_in_and_bad_arguments_share_an_exit_status(portal, tmp_path, monkeypatch):
    forged = run_submit(tmp_path, REFERENCE_Q, env={"HPCGRADE_TOKEN": "forged"})
    assert forged.exit_code == NOT_LOGGED_IN and "hpcgrade login" in forged.stderr
    monkeypatch.delenv("HPCGRADE_TOKEN")
    assert run_submit(tmp_path, REFERENCE_Q).exit_code == NOT_LOGGED_IN
    assert CliRunner().invoke(submit, ["autograd-q", "/no/such/file.py"]).exit_code == NOT_LOGGED_IN
    wrong = CliRunner().invoke(login, ["--username", "ana", "--password", "wrong"])
    assert wrong.exit_code == NOT_LOGGED_IN and "wrong username or password" in wrong.stderr


@pytest.mark.parametrize(
    "ended",
    [
        sa.delete(ApiToken),
        sa.update(ApiToken).values(
            expires_at=dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
        ),
    ],
    ids=["revoked", "expired"],
)
def test_a_saved_token_that_no_longer_works_says_to_log_in_again(
    portal, course, monkeypatch, tmp_path, ended
):
    monkeypatch.delenv("HPCGRADE_TOKEN")
    logged_in = CliRunner().invoke(login, ["--username", "ana", "--password", "long-password"])
    assert logged_in.exit_code == 0, logged_in.output
    with course.app_context(), course.extensions["hpcgrade.db"].sessions() as session:
        session.execute(ended)  # as a password change or the account's page does
        session.commit()
    result = run_submit(tmp_path, REFERENCE_Q)
    assert result.exit_code == NOT_LOGGED_IN
    assert (
        "Your saved token is no longer valid (revoked or expired): run `hpcgrade login` again"
    ) in result.stderr
    from_environment = run_submit(tmp_path, REFERENCE_Q, env={"HPCGRADE_TOKEN": "forged"})
    assert from_environment.exit_code == NOT_LOGGED_IN
    assert "The token in HPCGRADE_TOKEN" in from_environment.stderr  # logging in again won't do


def test_an_exercise_in_two_courses_is_submitted_to_the_one_named(portal, course, tmp_path):
    second_edition(course, tmp_path / "exercises")
    both = run_submit(tmp_path, REFERENCE_Q, "--no-wait")
    assert both.exit_code == REFUSED
    assert both.stderr == (
        "Error: exercise autograd-q is in several of your courses: name one, as "
        f"COURSE/autograd-q (pytorch, {SECOND_COURSE})\nName one: "
        "COURSE/EXERCISE, or --course COURSE, or set HPCGRADE_CLIENT_COURSE for all your commands "
        "(`hpcgrade my-courses` lists your courses)\n"
    )
    for args in (["--course", SECOND_COURSE], ["--course", SECOND_COURSE, "--json"]):
        named = run_submit(tmp_path, REFERENCE_Q, "--no-wait", *args)
        assert named.exit_code == GRADED, named.output
        assert (
            f"for {SECOND_COURSE}/autograd-q: {portal}/courses/{SECOND_COURSE}/submissions/"
            in named.stderr
        )
    in_the_name = run_submit(tmp_path, REFERENCE_Q, "--no-wait", exercise="pytorch/autograd-q")
    assert re.fullmatch(rf"{portal}/courses/pytorch/submissions/\d+", in_the_name.stdout.strip())
    clash = run_submit(
        tmp_path, REFERENCE_Q, "--course", SECOND_COURSE, exercise="pytorch/autograd-q"
    )
    assert clash.exit_code == NOT_LOGGED_IN and "names another course" in clash.stderr  # bad args
    usual = run_submit(
        tmp_path, REFERENCE_Q, "--no-wait", env={"HPCGRADE_CLIENT_COURSE": SECOND_COURSE}
    )
    assert f"/courses/{SECOND_COURSE}/submissions/" in usual.stdout, usual.output
    overridden = run_submit(
        tmp_path,
        REFERENCE_Q,
        "--no-wait",
        "--course",
        "pytorch",
        env={"HPCGRADE_CLIENT_COURSE": SECOND_COURSE},
    )
    assert "/courses/pytorch/submissions/" in overridden.stdout, overridden.output
    from server.core.catalogue import default_root

    reference_vjp = (default_root() / "autograd-vjp" / "reference.py").read_text()
    alone = run_submit(tmp_path, reference_vjp, "--no-wait", exercise="autograd-vjp")
    assert alone.exit_code == GRADED, alone.output  # in one of ana's courses: no course needed


def test_my_courses_and_logging_in_list_the_users_courses_and_role(
    portal, course, tmp_path, monkeypatch
):
    second_edition(course, tmp_path / "exercises")
    listed = CliRunner().invoke(my_courses, [])
    assert listed.exit_code == 0, listed.output
    assert re.fullmatch(
        rf"{SECOND_COURSE} +student +Tensors and autograd \(2027\)\n"
        r"pytorch +student +Tensors and autograd\n",
        listed.stdout,
    )
    spanish = CliRunner().invoke(my_courses, ["--lang", "es"]).stdout
    assert "Tensores y autograd (2027)" in spanish
    as_json = json.loads(CliRunner().invoke(my_courses, ["--json"]).stdout)
    assert [(c["slug"], c["role"]) for c in as_json] == [
        (SECOND_COURSE, "student"),
        ("pytorch", "student"),
    ]
    monkeypatch.delenv("HPCGRADE_TOKEN")
    logged_in = CliRunner().invoke(login, ["--username", "olga", "--password", "long-password"])
    assert logged_in.exit_code == 0, logged_in.output
    assert re.search(rf"your courses:\n{SECOND_COURSE} +instructor ", logged_in.stdout)
    assert CliRunner().invoke(my_courses, []).stdout.startswith(f"{SECOND_COURSE} ")
    monkeypatch.setenv("HPCGRADE_CLIENT_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("HPCGRADE_SERVER")
    assert CliRunner().invoke(my_courses, []).exit_code == NOT_LOGGED_IN


@pytest.fixture
def another_host():
    """A server standing for another host: its address, and the Authorization headers that
    reached it."""
    received = []

    def site(environ, start_response):
        received.append(environ.get("HTTP_AUTHORIZATION"))
        start_response("404 Not Found", [("Content-Type", "application/json")])
        return [b'{"error": "nothing here"}']

    with served_over_http(site) as url:
        yield url.removeprefix("http://"), received


def test_the_token_goes_to_the_configured_server_whatever_host_an_answer_names(
    portal, course, another_host, monkeypatch, tmp_path
):
    """The submission's address in the portal's answer names another host (the Host header a
    proxy passed on, or an answer forged): its path is followed on the configured server."""
    host, received = another_host
    portal_app = course.wsgi_app
    monkeypatch.setattr(
        course, "wsgi_app", lambda environ, start: portal_app({**environ, "HTTP_HOST": host}, start)
    )
    monkeypatch.setattr("server.web.api.enqueue", failed_at_once)  # the result is read once at once
    named = json.loads(run_submit(tmp_path, REFERENCE_Q, "--no-wait", "--json").stdout)["url"]
    assert named.startswith(f"http://{host}/api/v1/submissions/")
    result = run_submit(tmp_path, REFERENCE_Q)
    assert result.exit_code == NO_GRADE, result.output
    assert Service().get(named)["status"] == "error"  # the client of Jupyter and `hpcgrade check`
    assert received == []


def test_an_unreachable_server_is_its_own_exit_status(tmp_path, monkeypatch):
    monkeypatch.setattr("hpcgrade.service.RETRIES", 0)
    result = run_submit(
        tmp_path, REFERENCE_Q, env={"HPCGRADE_SERVER": "http://127.0.0.1:1", "HPCGRADE_TOKEN": "t"}
    )
    assert result.exit_code == UNREACHABLE and "cannot connect" in result.stderr


def test_the_exit_statuses_are_documented_in_the_help():
    text = CliRunner().invoke(submit, ["--help"]).output
    for status in (GRADED, NO_GRADE, NOT_LOGGED_IN, REFUSED, TIMED_OUT, UNREACHABLE):
        assert f"\n    {status}  " in text
    assert "timed out" in text and "refused" in text and "not logged in" in text


def test_the_result_is_styled_only_on_a_terminal_that_wants_colour(monkeypatch, misnamed_report):
    styled = summary("work.py", misnamed_report, "es", styled=True)
    assert "\x1b[36mq_grads\x1b[39m no está definida." in styled
    assert "q_grads no está definida." in summary("work.py", misnamed_report, "es")
    monkeypatch.setattr("sys.stdout", io.StringIO())
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert client.styled_output()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not client.styled_output()


def test_the_client_sends_again_after_a_server_error_not_after_a_refusal(monkeypatch):
    """A 503 is sent again after the Retry-After the server says, a 500 at once; a refusal is
    final; a log-in is never sent twice."""
    answers, slept = [], []

    def site(environ, start_response):
        # read as an app does: werkzeug would wait for the rest until the client closes
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        status, headers, body = answers.pop(0)
        start_response(status, [("Content-Type", "application/json"), *headers])
        return [body]

    monkeypatch.setattr("hpcgrade.service.time.sleep", slept.append)
    with served_over_http(site) as url:
        service = Service(url, token="t")
        answers[:] = [
            ("500 Internal Server Error", [], b"{}"),
            ("503 Service Unavailable", [("Retry-After", "7")], b"{}"),
            ("200 OK", [], b'{"exercises": []}'),
        ]
        assert service.get("/api/v1/exercises") == {"exercises": []} and slept == [0, 7]
        answers[:] = [("404 Not Found", [], b'{"error": "no such exercise"}')]
        with pytest.raises(ServiceError, match="no such exercise") as refused:
            service.get("/api/v1/exercises/none/files")
        assert refused.value.kind == REFUSED_KIND and answers == []
        answers[:] = [("503 Service Unavailable", [], b'{"error": "busy"}'), ("200 OK", [], b"{}")]
        with pytest.raises(ServiceError, match="busy"):
            log_in(service.server, "ana", "long-password")
        assert len(answers) == 1


def test_an_address_without_its_leading_slash_stays_on_the_server():
    """ "6/steal" after "http://127.0.0.1:897" made port 8976, and ".evil.net/x" after a host
    another host: a forged answer took the token elsewhere."""
    assert on_server("http://127.0.0.1:897", "6/steal") == "http://127.0.0.1:897/6/steal"
    assert on_server("https://grader.uni.es", ".evil.net/x") == "https://grader.uni.es/.evil.net/x"
    assert on_server("https://grader.uni.es", "//evil.net/x?a=1") == "https://grader.uni.es/x?a=1"
