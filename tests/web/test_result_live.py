"""The submission page while it waits and once graded (issue 23): a status request held until the
submission leaves the status the page shows, an estimate from the recent grading rate and a word
when nothing moves, and the result page's summary: when it was sent, the attempts left, no
"Submit again" while it waits, the failed checks at the top, each hint once, and a notebook's
code as its student wrote it."""

import datetime as dt
import re
from html import unescape

import pytest
from helpers import REFERENCE_Q, change_settings, logged_in, notebook
from sqlalchemy import select
from test_result_page import SIGN_FLIPPED, graded_page, send

from server.core.models import ClusterState, Exercise, GradingRun, Submission, utcnow
from server.web import live, results

pytestmark = pytest.mark.postgresql_only


@pytest.fixture(autouse=True)
def fresh_pace(monkeypatch):
    """Each test reads the grading rate of its own database."""
    monkeypatch.setattr(results, "_pace_kept", None)


@pytest.fixture
def grading(course, executor, catalogue):
    course.extensions["test.executor"], course.extensions["test.catalogue"] = executor, catalogue
    return course


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", unescape(re.sub(r"<[^>]+>", "", html)))


def submission_id(sent) -> int:
    return int(sent.headers["Location"].rsplit("/", 1)[1])


def change(app, submission: int, **values) -> None:
    with app.extensions["hpcgrade.db"].sessions() as session:
        row = session.get(Submission, submission)
        for name, value in values.items():
            setattr(row, name, value)
        session.commit()


# --- the held status -------------------------------------------------------------------------


def test_a_held_status_comes_back_once_the_submission_leaves_the_status_shown(monkeypatch):
    monkeypatch.setattr(live, "CHECK_EVERY", 0)
    states = iter(["queued", "running", "graded"])
    assert (
        live.once_changed("queued", lambda: next(states), str, "queued", threaded=True) == "running"
    )
    assert (
        live.once_changed("graded", lambda: pytest.fail("read again"), str, "queued", threaded=True)
        == "graded"
    )  # it had already changed


def test_a_server_without_threads_to_spare_answers_at_once(monkeypatch):
    never = lambda: pytest.fail("held")  # noqa: E731
    assert live.once_changed("queued", never, str, "queued", threaded=False) == "queued"
    assert live.once_changed("queued", never, str, None, threaded=True) == "queued"
    for _ in range(live.HELD_PER_PROCESS):
        assert live._held.acquire(blocking=False)
    try:
        assert live.once_changed("queued", never, str, "queued", threaded=True) == "queued"
    finally:
        for _ in range(live.HELD_PER_PROCESS):
            live._held.release()


def test_the_status_asked_after_a_status_it_left_answers_with_the_new_one(course):
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    change(course, submission_id(sent), status="running")
    status = client.get(
        sent.headers["Location"] + "/status?after=queued",
        environ_overrides={"wsgi.multithread": True},
    )
    assert status.status_code == 200 and status.json["status"] == "running"
    assert (
        client.get(
            sent.headers["Location"].replace(str(submission_id(sent)), "999999")
            + "/status?after=queued"
        ).status_code
        == 404
    )


# --- the queue: an estimate, and a stall said -------------------------------------------------


def finished_runs(app, count: int, ago: dt.timedelta = dt.timedelta(minutes=1)) -> None:
    """`count` runs of one of bea's submissions, finished `ago`."""
    with app.extensions["hpcgrade.db"].sessions() as session:
        from server.core.models import User

        bea = session.scalar(select(User).where(User.username == "bea"))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
        done = Submission(
            user=bea,
            exercise=exercise,
            filename="b.py",
            code=b"x = 1\n",
            sha256="0" * 64,
            submitted_at=utcnow() - ago,
            status="graded",
        )
        session.add(done)
        for attempt in range(1, count + 1):
            session.add(
                GradingRun(
                    submission=done,
                    attempt=attempt,
                    executor="local",
                    status="done",
                    started_at=utcnow() - ago,
                    lease_until=utcnow(),
                    finished_at=utcnow() - ago,
                )
            )
        session.commit()


def test_a_queued_submission_has_an_estimate_from_the_recent_grading_rate(course):
    finished_runs(course, 20)  # 20 in the last 10 minutes: one every 30 s
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    status = client.get(sent.headers["Location"] + "/status").json
    assert status["queue_position"] == 1 and status["estimate_seconds"] == 30
    assert status["estimate"] == "about a minute or less" and not status["stalled"]
    page = text_of(client.get(sent.headers["Location"]).text)
    assert "position in queue: 1 · about a minute or less" in page
    assert "slower than usual" not in page


def test_without_enough_recent_grades_there_is_no_estimate(course):
    client, token = logged_in(course)
    status = client.get(send(client, token, REFERENCE_Q).headers["Location"] + "/status").json
    assert status["queue_position"] == 1 and status["estimate_seconds"] is None
    assert status["estimate"] is None


def test_a_queue_where_nothing_moved_for_a_while_says_so_and_that_the_file_is_safe(course):
    """The worker paused for 75 s: the page said "queued · position 1" and nothing else."""
    finished_runs(course, 5, ago=dt.timedelta(minutes=3))
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    change(course, submission_id(sent), submitted_at=utcnow() - dt.timedelta(seconds=75))
    status = client.get(sent.headers["Location"] + "/status").json
    assert status["stalled"] and status["queue_position"] == 1
    assert "Grading is slower than usual; your submission is safe" in status["note"]
    assert "Grading is slower than usual; your submission is safe" in text_of(
        client.get(sent.headers["Location"]).text
    )


def test_a_queue_that_moves_is_not_said_to_be_stalled(course):
    finished_runs(course, 5, ago=dt.timedelta(seconds=10))
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    change(course, submission_id(sent), submitted_at=utcnow() - dt.timedelta(seconds=75))
    status = client.get(sent.headers["Location"] + "/status").json
    assert not status["stalled"] and status["note"] is None


def test_while_the_cluster_takes_no_jobs_the_student_hears_it_from_the_database(course):
    """sbatch refused (worker/grading/cluster_state.py wrote it): the page and the API say the
    cluster is not taking jobs, not only "queued"; once it takes them again, nothing is said."""
    change_settings(course, EXECUTOR="slurm")
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        session.add(
            ClusterState(
                executor="slurm",
                failures=2,
                since=utcnow(),
                resting_until=utcnow() + dt.timedelta(seconds=10),
                reason="Socket timed out on send/recv operation",
            )
        )
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    status = client.get(sent.headers["Location"] + "/status").json
    assert status["waiting_for_cluster"] and status["queue_position"] == 1
    assert "The cluster is not taking new jobs just now" in status["note"]
    assert "The cluster is not taking new jobs just now" in text_of(
        client.get(sent.headers["Location"]).text
    )
    api_client = course.test_client()
    api_token = api_client.post(
        "/api/v1/tokens", json={"username": "ana", "password": "long-password"}
    ).json
    api = api_client.get(
        f"/api/v1/submissions/{submission_id(sent)}",
        headers={"Authorization": f"Bearer {api_token['token']}"},
    )
    assert api.json["waiting_for_cluster"] and "not taking new jobs" in api.json["note"]
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        session.get(ClusterState, "slurm").resting_until = utcnow()
    results._pace_kept = None
    status = client.get(sent.headers["Location"] + "/status").json
    assert not status["waiting_for_cluster"] and status["note"] is None


@pytest.mark.parametrize(
    ("fault", "status", "english", "spanish"),
    [
        ("spool_full", "queued", "the grading service's disk is full", "disco"),
        ("cluster_away", "running", "The cluster does not answer just now", "no responde"),
        ("schedule_stopped", "running", "waits to be collected", "recoge"),
    ],
)
def test_a_fault_of_the_infrastructure_is_said_in_the_students_words(
    course, fault, status, english, spanish
):
    """What server/core/conditions.py holds reaches the page and the API, in both languages,
    with the fault named in `held_by`; once it is cleared, nothing is said."""
    from server.core import conditions
    from server.core.conditions import Fault

    change_settings(course, EXECUTOR="slurm")  # its runs' reports are collected
    client, token = logged_in(course)
    sent = send(client, token, REFERENCE_Q)
    if status == "running":
        change(course, submission_id(sent), status="running")
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        conditions.hold(session, Fault(fault), "a test's fault")
    seen = client.get(sent.headers["Location"] + "/status").json
    assert seen["held_by"] == fault and english in seen["note"]
    assert english in text_of(client.get(sent.headers["Location"]).text)
    client.get("/courses/pytorch/?lang=es")
    results._pace_kept = None
    assert spanish in client.get(sent.headers["Location"] + "/status").json["note"]
    with course.extensions["hpcgrade.db"].sessions.begin() as session:
        conditions.clear(session, Fault(fault))
    results._pace_kept = None
    seen = client.get(sent.headers["Location"] + "/status").json
    assert seen["held_by"] is None and seen["note"] is None


# --- the result page -------------------------------------------------------------------------


def test_a_waiting_submission_shows_when_it_was_sent_and_no_submit_again(course):
    client, token = logged_in(course)
    with course.extensions["hpcgrade.db"].sessions() as session:
        session.scalar(select(Exercise).where(Exercise.slug == "autograd-q")).max_attempts = 3
        session.commit()
    page = text_of(client.get(send(client, token, REFERENCE_Q).headers["Location"]).text)
    assert re.search(r"Submitted \S.*\d\d:\d\d [A-Z]+ · work\.py", page), page
    assert "2 attempts left" in page
    assert "Submit again" not in page


def test_a_graded_page_sums_up_the_failed_checks_and_gives_each_hint_once(grading):
    client, token = logged_in(grading)
    page = graded_page(grading, client, send(client, token, SIGN_FLIPPED, "work.py"))
    summary = re.search(r'<section class="card summary".*?</section>', page, re.S).group(0)
    failed = re.findall(r'<li><a href="#(check-\d+)">', summary)
    assert failed and re.search(r"\d+ checks? failed:", summary)
    for anchor in failed:
        assert f'id="{anchor}"' in page and f'class="card check failed" id="{anchor}"' in page
    hints = re.findall(r'<p class="hint">(.*?)</p>', page, re.S)
    # the mutant's diagnostics share a hint, once said three times
    assert len(re.findall(r'<div class="diagnostic">', page)) > len(hints) > 0
    assert len(hints) == len(set(hints))
    assert "Submit again" in text_of(summary)


def test_a_notebook_is_shown_as_its_student_wrote_it(grading):
    """Not the grader's rewrite of its magics: `pass  # neutralised: %matplotlib inline`."""
    client, token = logged_in(grading, lang="es")
    page = graded_page(
        grading,
        client,
        send(
            client, token, notebook("%matplotlib inline\nimport torch", REFERENCE_Q), "work.ipynb"
        ),
    )
    assert "neutralised" not in page
    assert re.search(r'<li id="line-1-1">%matplotlib inline</li>', page)
