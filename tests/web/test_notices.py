"""Notices the staff's changes send: a grade or a score set by hand, an exception, a published
regrade. The page only commits and sends the task hpcgrade.notify (recorded here, never run by
the request); the task then mails, through a real SMTP server (aiosmtpd), the student who
wants it, in the language they last chose. Each user turns each notice on or off on their
account's page."""

import datetime as dt

import pytest
from helpers import IN_COURSE, change_settings, logged_in, received
from sqlalchemy import select

from server.core.models import Exercise, GradingRun, SetGrade, User, utcnow

SLUG = "autograd-q"
TITLE = {"en": "Gradients of a non-scalar function", "es": "Gradientes de una función no escalar"}


def run_sent(app, sent) -> None:
    """What a worker does with the tasks the pages sent."""
    from worker.grading.tasks import notify

    for name, args in sent:
        assert name == "hpcgrade.notify"
        notify.apply(args=args).get()
    sent.clear()


def rows(app, table, **where):
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        return session.scalars(select(table).filter_by(**where)).all()


def user_id(app, username: str) -> int:
    return rows(app, User, username=username)[0].id


def set_grade(app, score="7", comment="Agreed in person"):
    client, token = logged_in(app, "prof")
    return client.post(
        f"{IN_COURSE}/staff/students/ana/exercises/{SLUG}/grade",
        data={"csrf_token": token, "score": score, "comment": comment},
    )


def test_a_grade_set_by_hand_is_mailed_by_the_task_not_the_request(mailing):
    app, recorder, sent = mailing
    assert set_grade(app).status_code == 303
    (set_row,) = rows(app, SetGrade)
    assert sent == [("hpcgrade.notify", ["grade_set", [set_row.id]])]
    assert recorder.messages == []  # the request only enqueued it
    run_sent(app, sent)
    [(to, subject, body)] = received(recorder)
    assert (to, subject) == ("a@uni.es", f"Your grade on {TITLE['en']} was set by hand")
    assert "Hello Ana García" in body and "Pilar set your grade" in body
    assert "it is 7 / 10" in body and "Agreed in person" in body
    assert f"https://grader.uni.es/courses/pytorch/exercises/{SLUG}" in body
    assert "https://grader.uni.es/account/notices" in body


def test_a_spanish_reader_gets_it_in_spanish(mailing):
    """ana chose Spanish on a page: mail reaches her in it (its translations merged)."""
    app, recorder, sent = mailing
    logged_in(app, "ana", lang="es")
    assert rows(app, User, username="ana")[0].language == "es"
    set_grade(app, score="7,5")
    run_sent(app, sent)
    [(_to, subject, body)] = received(recorder)
    assert subject == f"Tu nota en {TITLE['es']} se ha puesto a mano"
    assert "Hola, Ana García" in body and "7,5 / 10" in body


def granted_to_ana_and_bea(mailing, page: str, form: dict, event: str) -> dict:
    """prof saves `form` on ana's and on bea's `page` (bea reads Spanish); each request only
    sends the task `event`, whose mail then goes out: address → (subject, body)."""
    app, recorder, sent = mailing
    logged_in(app, "bea", lang="es")
    client, token = logged_in(app, "prof")
    for student in ("ana", "bea"):
        done = client.post(
            f"{IN_COURSE}/staff/students/{student}/{page}", data={"csrf_token": token, **form}
        )
        assert done.status_code == 303
    assert [args[0] for _name, args in sent] == [event, event]
    assert recorder.messages == []
    run_sent(app, sent)
    return {to: (subject, body) for to, subject, body in received(recorder)}


def test_an_exception_is_mailed_in_english_and_in_spanish(mailing):
    got = granted_to_ana_and_bea(
        mailing,
        f"exercises/{SLUG}",
        {"deadline": "", "extra_attempts": "3", "comment": "Ill"},
        "exception",
    )
    assert got["a@uni.es"][0] == f"You have an exception on {TITLE['en']}"
    assert "Your attempts: 23 in all." in got["a@uni.es"][1] and "Ill" in got["a@uni.es"][1]
    assert got["b@uni.es"][0] == f"Tienes una excepción en {TITLE['es']}"


def test_an_accommodation_is_mailed_with_its_terms_in_english_and_in_spanish(mailing):
    got = granted_to_ana_and_bea(
        mailing,
        "accommodation",
        {"extra_days": "3", "attempts_factor": "1.5", "comment": "Disability plan"},
        "accommodation",
    )
    subject, body = got["a@uni.es"]
    assert subject == "You have an accommodation in Tensors and autograd"
    assert "Pilar granted you an accommodation in Tensors and autograd, on every exercise." in body
    assert "Every deadline of the course is 3 days later for you." in body
    assert "Every limit of attempts is 1.5 times the exercise's for you, rounded up." in body
    assert "Disability plan" in body and "https://grader.uni.es/courses/pytorch/" in body
    subject, body = got["b@uni.es"]
    assert subject.startswith("Tienes una adaptación en")
    assert "1,5 veces" in body


def graded_submission(app, username: str, score: float, max_score: float = 10.0) -> int:
    """A graded submission of `username` to SLUG (one done run); its id."""
    from helpers import graded_report

    from server.core import runs
    from server.web.submissions import Rules, accept

    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        user = session.scalar(select(User).where(User.username == username))
        exercise = session.scalar(select(Exercise).where(Exercise.slug == SLUG))
        submission = accept(
            session, user, exercise, "work.py", b"x = 1\n", Rules(1024, 100, 60), utcnow()
        )
        session.flush()
        claimed = runs.claim(session, submission.id, "local", "test", dt.timedelta(minutes=5))
        runs.record(session, claimed.run_id, graded_report(score, max_score))
        session.commit()
        return submission.id


def test_a_score_adjusted_by_hand_is_mailed(mailing):
    app, recorder, sent = mailing
    submission_id = graded_submission(app, "ana", 4)
    client, token = logged_in(app, "prof")
    done = client.post(
        f"{IN_COURSE}/staff/submissions/{submission_id}/override",
        data={"csrf_token": token, "score": "6", "comment": "Partial credit"},
    )
    assert done.status_code == 303 and sent == [
        ("hpcgrade.notify", ["score_adjusted", [submission_id]])
    ]
    run_sent(app, sent)
    [(to, subject, body)] = received(recorder)
    assert to == "a@uni.es"
    assert subject == (
        f"The score of your submission #{submission_id} to {TITLE['en']} was adjusted by hand"
    )
    assert "it is now 6 / 10" in body and "Partial credit" in body
    assert f"/courses/pytorch/submissions/{submission_id}" in body


def test_a_published_regrade_mails_those_whose_grade_changed(mailing):
    from server.web.regrade_preview import start

    app, recorder, sent = mailing
    ana, bea = graded_submission(app, "ana", 5), graded_submission(app, "bea", 5)
    with app.app_context(), app.extensions["hpcgrade.db"].sessions() as session:
        exercise = session.scalar(select(Exercise).where(Exercise.slug == SLUG))
        prof = session.scalar(select(User).where(User.username == "prof"))
        regrade = start(session, exercise, prof, utcnow())
        session.flush()
        for run in session.scalars(select(GradingRun).where(GradingRun.regrade_id == regrade.id)):
            # as the preview's worker grades them: ana's grade goes up, bea's stays
            run.status, run.max_score = "preview", 10.0
            run.score = 8.0 if run.submission_id == ana else 5.0
        regrade_id = regrade.id
        session.commit()
    client, token = logged_in(app, "prof")
    client.post(f"{IN_COURSE}/staff/regrades/{regrade_id}/publish", data={"csrf_token": token})
    assert sent == [("hpcgrade.notify", ["regraded", [ana]])] and bea != ana
    run_sent(app, sent)
    [(to, subject, body)] = received(recorder)
    assert (to, subject) == ("a@uni.es", f"Your grade on {TITLE['en']} changed")
    assert "it is now 8 / 10" in body


def test_a_notice_turned_off_is_not_mailed(mailing):
    app, recorder, sent = mailing
    client, token = logged_in(app, "ana")
    page = client.get("/account/notices")
    assert 'name="score_set" checked' in page.text and 'name="graded">' in page.text
    saved = client.post("/account/notices", data={"csrf_token": token, "exception": "on"})
    assert saved.status_code == 303
    assert "Your notice settings are saved" in client.get(saved.headers["Location"]).text
    assert rows(app, User, username="ana")[0].notices == {
        "score_set": False,
        "exception": True,
        "regrade": False,
        "graded": False,
        "deadline": False,
    }
    set_grade(app)
    run_sent(app, sent)
    assert recorder.messages == []


def test_the_page_needs_its_csrf_token(mailing):
    app, _recorder, _sent = mailing
    client, _token = logged_in(app, "ana")
    assert client.post("/account/notices", data={"exception": "on"}).status_code == 400
    assert rows(app, User, username="ana")[0].notices == {}


def test_students_see_their_notices_and_instructors_theirs_too(mailing):
    app, _recorder, _sent = mailing
    student, _token = logged_in(app, "ana")
    page = student.get("/account/notices").text
    assert "A submission of mine is graded" in page and "grading_failed" not in page
    prof, _token = logged_in(app, "prof")
    assert 'name="grading_failed" checked' in prof.get("/account/notices").text
    assert "/account/notices" in prof.get("/account/tokens").text


def test_the_page_in_spanish(mailing):
    app, _recorder, _sent = mailing
    client, _token = logged_in(app, "ana", lang="es")
    page = client.get("/account/notices").text
    assert "Avisos por correo" in page and "Una entrega mía está corregida" in page


def test_a_broker_that_is_away_loses_the_notice_not_the_change(mailing, monkeypatch):
    app, recorder, _sent = mailing

    def broker_away(*args, **kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(app.extensions["celery"], "send_task", broker_away)
    assert set_grade(app).status_code == 303
    assert [row.score for row in rows(app, SetGrade)] == [7.0]
    assert recorder.messages == []


def test_nothing_is_sent_without_a_mail_server(mailing):
    app, _recorder, sent = mailing
    change_settings(app, MAIL_SERVER="")
    set_grade(app)
    assert sent == [] and rows(app, SetGrade)


def test_a_mail_server_that_is_away_is_tried_again_for_the_notices_left(mailing, monkeypatch):
    from helpers import free_port

    from worker.grading.tasks import notify

    app, recorder, sent = mailing
    set_grade(app)
    change_settings(app, MAIL_PORT=free_port())  # nothing listens there now
    retried = []

    class Again(Exception):
        pass

    monkeypatch.setattr(notify, "retry", lambda **options: retried.append(options) or Again())
    with app.app_context(), pytest.raises(Again):
        notify.run(*sent[0][1])
    assert retried[0]["args"] == sent[0][1] and retried[0]["countdown"] == 60
    assert recorder.messages == []
