"""Notices the workers send: a submission graded (to the students who asked), sent by the
grading task once the grade is committed; the beat's rounds: deadline reminders (once, to
students who sent nothing) and grader failures (one mail per course to each instructor per
round, however many failed). Mailed through a real SMTP server (aiosmtpd)."""

import datetime as dt

import pytest
from helpers import change_settings, queue_submission, received
from sqlalchemy import select, update

from server.core.models import Exercise, GradingRun, Submission, User, utcnow
from server.core.notices import Kind, choose
from server.core.users import add_user
from worker.harness import spool
from worker.harness.report import Report

SLUG, OTHER = "autograd-q", "autograd-accumulation"
TITLE = {"en": "Gradients of a non-scalar function", "es": "Gradientes de una función no escalar"}


def database(app):
    return app.extensions["hpcgrade.db"]


def set_up(app, username: str, language: str | None = None, **notices: bool) -> None:
    with app.app_context(), database(app).sessions() as session:
        user = session.scalar(select(User).where(User.username == username))
        choose(user, {Kind(kind): on for kind, on in notices.items()})
        user.language = language
        session.commit()


# --- graded -------------------------------------------------------------------------------------


class Slots:
    """A synchronous executor that grades at once: 3 points of 4."""

    name, synchronous = "local", True

    def __init__(self, spool_dir):
        self.spool = spool_dir

    def submit(self, jobs, shape=None):
        for job in jobs:
            spool.write_report(
                spool.run_dir(self.spool, job.id),
                Report.from_dict(
                    {"status": "graded", "score": 3.0, "max_score": 4.0, "checks": []}
                ),
            )
        return [f"local-{job.id}" for job in jobs]

    def read_report(self, run_id):
        return spool.read_report(spool.run_dir(self.spool, run_id))


@pytest.fixture
def slots(mailing, tmp_path, monkeypatch):
    from worker.grading import tasks

    app = mailing[0]
    change_settings(app, SPOOL_DIR=str(tmp_path / "spool"))
    monkeypatch.setattr(tasks, "_executor", [Slots(tmp_path / "spool")])
    return mailing


@pytest.mark.parametrize(
    "language, subject",
    [
        (None, "Submission #{id} to {title} is graded"),
        ("es", "La entrega n.º {id} de {title} está corregida"),
    ],
)
def test_a_graded_submission_is_mailed_to_a_student_who_asked(slots, language, subject):
    from worker.grading.tasks import dispatch, notify

    app, recorder, sent = slots
    set_up(app, "ana", language, graded=True)
    submission_id = queue_submission(database(app), "def f(): pass\n")
    assert dispatch.apply(args=[[submission_id]]).get() == {submission_id: "graded"}
    assert sent == [("hpcgrade.notify", ["graded", [submission_id]])]
    assert notify.apply(args=sent[0][1]).get() == 1
    [(to, got, body)] = received(recorder)
    title = TITLE[language or "en"]
    assert (to, got) == ("a@uni.es", subject.format(id=submission_id, title=title))
    assert "3 / 4" in body and f"/courses/pytorch/submissions/{submission_id}" in body


def test_graded_is_off_until_chosen(slots):
    from worker.grading.tasks import dispatch, notify

    app, recorder, sent = slots
    submission_id = queue_submission(database(app), "def f(): pass\n")
    dispatch.apply(args=[[submission_id]]).get()
    assert notify.apply(args=sent[0][1]).get() == 0 and recorder.messages == []


# --- deadline reminders -------------------------------------------------------------------------


@pytest.fixture
def due_soon(mailing):
    """SLUG due in 12 hours, OTHER in 3 days, no other deadline; ana, bea and carl want
    reminders, bea has sent a file to SLUG already."""
    app = mailing[0]
    now = utcnow()
    with app.app_context(), database(app).sessions() as session:
        add_user(session, "carl", "Carl", "c@uni.es", "student", "long-password")
        session.execute(update(Exercise).values(deadline=None))
        session.execute(
            update(Exercise)
            .where(Exercise.slug == SLUG)
            .values(deadline=now + dt.timedelta(hours=12))
        )
        session.execute(
            update(Exercise)
            .where(Exercise.slug == OTHER)
            .values(deadline=now + dt.timedelta(days=3))
        )
        session.commit()
    for name in ("ana", "bea", "carl"):
        set_up(app, name, "es" if name == "carl" else None, deadline=True)
    bea_file = queue_submission(database(app), "def f(): pass\n")
    with app.app_context(), database(app).sessions() as session:
        session.get(Submission, bea_file).user_id = session.scalar(
            select(User.id).where(User.username == "bea")
        )
        session.commit()
    return mailing


def test_a_deadline_reminder_goes_once_to_whoever_sent_nothing(due_soon):
    from worker.grading.tasks import remind_deadlines

    app, recorder, _sent = due_soon
    assert remind_deadlines.apply().get() == 2
    got = {to: (subject, body) for to, subject, body in received(recorder)}
    assert set(got) == {"a@uni.es", "c@uni.es"}  # not bea, who sent a file
    assert got["a@uni.es"][0].startswith(f"{TITLE['en']} is due on ")
    assert "you have not submitted anything to it yet" in got["a@uni.es"][1]
    assert got["c@uni.es"][0].startswith(f"{TITLE['es']} vence el ")
    assert remind_deadlines.apply().get() == 0 and len(recorder.messages) == 2


def test_a_deadline_reminder_is_off_until_chosen(due_soon):
    from worker.grading.tasks import remind_deadlines

    app, recorder, _sent = due_soon
    for name in ("ana", "carl"):
        set_up(app, name, deadline=False)
    assert remind_deadlines.apply().get() == 0 and recorder.messages == []


def test_an_extension_moves_the_reminder(due_soon):
    """ana's extension puts her deadline past the next 24 hours: no reminder yet."""
    from server.core.models import Allowance
    from worker.grading.tasks import remind_deadlines

    app, recorder, _sent = due_soon
    with app.app_context(), database(app).sessions() as session:
        ana = session.scalar(select(User.id).where(User.username == "ana"))
        exercise = session.scalar(select(Exercise.id).where(Exercise.slug == SLUG))
        session.add(
            Allowance(user_id=ana, exercise_id=exercise, deadline=utcnow() + dt.timedelta(days=2))
        )
        session.commit()
    remind_deadlines.apply().get()
    assert [to for to, _subject, _body in received(recorder)] == ["c@uni.es"]


# --- grader failures ----------------------------------------------------------------------------


def fail(app, count: int) -> list[int]:
    """`count` of ana's submissions that ended as grader errors just now; their ids."""
    with app.app_context(), database(app).sessions() as session:
        session.execute(update(Exercise).values(max_attempts=None))
        session.commit()
    ids = [queue_submission(database(app), "def f(): pass\n") for _ in range(count)]
    with app.app_context(), database(app).sessions() as session:
        for submission_id in ids:
            session.get(Submission, submission_id).status = "error"
            session.add(
                GradingRun(
                    submission_id=submission_id,
                    attempt=1,
                    executor="slurm",
                    status="failed",
                    error="NODE_FAIL on gpu07",
                    lease_until=utcnow(),
                    finished_at=utcnow(),
                )
            )
        session.commit()
    return ids


def test_grader_failures_are_batched_one_mail_per_instructor_per_round(mailing):
    from worker.grading.tasks import report_failures

    app, recorder, _sent = mailing
    ids = fail(app, 30)
    assert report_failures.apply().get() == 1
    [(to, subject, body)] = received(recorder)  # not tina (a TA), nor the students
    assert (to, subject) == (
        "p@uni.es",
        "30 submissions of Tensors and autograd could not be graded",
    )
    assert f"#{ids[0]} {SLUG} (ana): NODE_FAIL on gpu07" in body
    assert f"https://grader.uni.es/courses/pytorch/submissions/{ids[0]}" in body
    assert f"#{ids[19]} " in body and f"#{ids[20]} " not in body and "…and 10 more." in body
    assert report_failures.apply().get() == 0  # told once
    fail(app, 1)
    assert report_failures.apply().get() == 1
    assert received(recorder)[-1][1] == "1 submission of Tensors and autograd could not be graded"


def test_grader_failures_in_spanish_and_turned_off(mailing):
    from worker.grading.tasks import report_failures

    app, recorder, _sent = mailing
    set_up(app, "prof", "es")
    fail(app, 2)
    report_failures.apply().get()
    assert received(recorder)[0][1] == "2 entregas de Tensores y autograd no se pudieron corregir"
    set_up(app, "prof", grading_failed=False)
    fail(app, 1)
    assert report_failures.apply().get() == 0 and len(recorder.messages) == 1


def test_a_failed_run_whose_submission_was_graded_after_is_no_news(mailing):
    from worker.grading.tasks import report_failures

    app, recorder, _sent = mailing
    (submission_id,) = fail(app, 1)
    with app.app_context(), database(app).sessions() as session:
        session.get(Submission, submission_id).status = "graded"
        session.commit()
    assert report_failures.apply().get() == 0 and recorder.messages == []


def test_a_submission_graded_on_the_cluster_is_told_by_the_collect_task(
    mailing, tmp_path, monkeypatch
):
    """On Slurm the grade is recorded by collect, which knows runs: the notice names the
    submission."""
    from test_dispatch import ScriptedCluster

    from worker.grading import tasks

    app, recorder, sent = mailing
    cluster = ScriptedCluster(tmp_path / "spool")
    change_settings(app, SPOOL_DIR=str(tmp_path / "spool"), EXECUTOR="slurm")
    monkeypatch.setattr(tasks, "_executor", [cluster])
    set_up(app, "ana", graded=True)
    submission_id = queue_submission(database(app), "def f(): pass\n")
    tasks.dispatch.apply(args=[[submission_id]]).get()
    (job,) = cluster.jobs
    cluster.end(
        job,
        "COMPLETED",
        Report.from_dict({"status": "graded", "score": 3.0, "max_score": 4.0, "checks": []}),
    )
    tasks.collect.apply().get()
    assert ("hpcgrade.notify", ["graded", [submission_id]]) in sent
