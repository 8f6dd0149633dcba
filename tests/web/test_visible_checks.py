"""Check on an exercise's page: the visible checks run in the sandbox on the code, as `hpcgrade
check` runs them, with no attempt used and no grade; refused as a submission is, limited per
window, after graded work, and shown to its student alone (worker/grading/visible_checks.py runs
them here with the session's harness, as the worker does with its own)."""

import dataclasses
import datetime as dt
import io
import re

import pytest
from helpers import REFERENCE_Q, change_settings, logged_in
from sqlalchemy import func, select

from server.core.config import app_settings
from server.core.models import Submission, VisibleCheck
from worker.grading import visible_checks
from worker.harness.report import Report

SUM_IGNORING_V = REFERENCE_Q.replace("gradient=v", "gradient=torch.ones_like(v)")
CHECK = "/courses/pytorch/exercises/autograd-q/check"


def ask(client, token, code: str, **form):
    return client.post(CHECK, data={"csrf_token": token, "code": code, **form})


def run_on_the_worker(app, harness, grade=None, now=None) -> str:
    """What the worker's task does once graded work has had its turn."""
    with app.app_context():
        session = app.extensions["hpcgrade.db"].sessions()
        check_id = session.scalar(select(func.max(VisibleCheck.id)))
        now = now or visible_checks.utcnow()
        taken = visible_checks.take(session, app_settings(), check_id, now)
        assert taken is not None
        assert visible_checks.take(session, app_settings(), check_id, now) is None  # once
        return visible_checks.run(
            session, app_settings(), taken, grade or (lambda job, python: harness.report_for(job))
        )


def submissions(app) -> int:
    with app.app_context():
        return (
            app.extensions["hpcgrade.db"]
            .sessions()
            .scalar(select(func.count()).select_from(Submission))
        )


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_check_shows_the_visible_checks_and_uses_no_attempt(course, harness, lang):
    client, token = logged_in(course, lang=lang)
    page = client.get("/courses/pytorch/exercises/autograd-q").text
    assert (
        "Comprobar (no gasta un intento)" if lang == "es" else "Check (does not use an attempt)"
    ) in page
    asked = ask(client, token, SUM_IGNORING_V)
    assert asked.status_code == 303 and re.search(r"/courses/pytorch/checks/\d+$", asked.location)
    waiting = client.get(asked.location)
    assert 'http-equiv="refresh"' in waiting.text and submissions(course) == 0
    assert run_on_the_worker(course, harness) == "done"
    shown = client.get(asked.location).text
    assert 'http-equiv="refresh"' not in shown
    assert ("20 intentos" if lang == "es" else "20 attempts left") in shown
    assert "1 / 3" in shown  # the statement's example passes; v is taken as ones elsewhere
    assert "grad-mismatch" in shown
    # the known wrong program named, in the page's language, as `hpcgrade check` names it
    assert ("pasa <code>v</code> como" if lang == "es" else "pass <code>v</code> as") in shown
    assert submissions(course) == 0


def test_a_right_answer_passes_them_all(course, harness):
    client, token = logged_in(course)
    asked = ask(client, token, "", file=(io.BytesIO(REFERENCE_Q.encode()), "work.py"))
    assert run_on_the_worker(course, harness) == "done"
    shown = client.get(asked.location).text
    assert "3 / 3" in shown and "✘" not in shown and "work.py" in shown


def test_what_a_submission_refuses_a_check_refuses_and_stores_nothing(course):
    client, token = logged_in(course)
    refused = ask(client, token, "def q_grad(a, b, v:\n")
    assert refused.status_code == 303 and refused.location.endswith("/exercises/autograd-q?kept=1")
    assert "not valid Python" in client.get(refused.location).text
    with course.app_context():
        stored = (
            course.extensions["hpcgrade.db"]
            .sessions()
            .scalar(select(func.count()).select_from(VisibleCheck))
        )
    assert stored == 0


def test_checks_are_limited_per_window_and_none_is_offered_at_zero(course):
    change_settings(course, CHECKS_PER_WINDOW="2")
    client, token = logged_in(course)
    assert ask(client, token, REFERENCE_Q).location.split("/")[-2] == "checks"
    assert ask(client, token, REFERENCE_Q).location.split("/")[-2] == "checks"
    third = ask(client, token, REFERENCE_Q)
    assert "At most 2 checks every 60 minutes" in client.get(third.location).text
    change_settings(course, CHECKS_PER_WINDOW="0")
    assert "does not use an attempt" not in client.get("/courses/pytorch/exercises/autograd-q").text
    assert "not offered" in client.get(ask(client, token, REFERENCE_Q).location).text


def test_another_student_never_sees_a_check(course):
    client, token = logged_in(course)
    asked = ask(client, token, REFERENCE_Q)
    other, _ = logged_in(course, "bea")
    assert other.get(asked.location).status_code == 404


def test_a_grader_that_fails_is_never_the_students_failure(course, harness):
    client, token = logged_in(course)
    asked = ask(client, token, REFERENCE_Q)
    broken = lambda job, python: Report.grader_error("the harness died", "autograd-q")  # noqa: E731
    assert run_on_the_worker(course, harness, broken) == "failed"
    shown = client.get(asked.location).text
    assert "the grader failed, not your code" in shown and "0 /" not in shown


def test_a_check_gives_way_to_graded_work(course):
    client, token = logged_in(course)
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        assert not visible_checks.graded_work_waits(session)
    client.post(
        "/courses/pytorch/exercises/autograd-q/submissions",
        data={"csrf_token": token, "code": REFERENCE_Q},
    )
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        assert visible_checks.graded_work_waits(session)


def test_a_check_whose_worker_died_is_run_again_then_given_up(course, harness):
    client, token = logged_in(course)
    asked = ask(client, token, REFERENCE_Q)
    with course.app_context():
        session = course.extensions["hpcgrade.db"].sessions()
        check_id = session.scalar(select(func.max(VisibleCheck.id)))
        started = visible_checks.utcnow()
        assert visible_checks.take(session, app_settings(), check_id, started) is not None
        # its worker dies: nobody takes it while it may still run, anybody once STALE passed
        later = started + visible_checks.STALE + dt.timedelta(seconds=1)
        assert visible_checks.take(session, app_settings(), check_id, started) is None
        again = visible_checks.take(session, app_settings(), check_id, later)
        assert again is not None
        # the first worker, back after all, finds it taken over and stores nothing
        first = dataclasses.replace(again, started_at=started)
        ran = lambda job, python: harness.report_for(job)  # noqa: E731
        assert visible_checks.run(session, app_settings(), first, ran) == "taken over"
        much_later = later + visible_checks.STALE + dt.timedelta(seconds=1)
        assert visible_checks.take(session, app_settings(), check_id, much_later) is not None
        given_up = much_later + visible_checks.STALE + dt.timedelta(seconds=1)
        assert visible_checks.take(session, app_settings(), check_id, given_up) is None
        assert session.get(VisibleCheck, check_id).status == "failed"
    assert "the grader failed, not your code" in client.get(asked.location).text
