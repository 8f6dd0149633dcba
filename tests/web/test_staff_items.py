"""Issue 23, point 5, the staff's smaller items: a removal confirmed on a page of its own, the
comment of a score set by hand as inline Markdown, deadlines with their time zone and the
exception's date in the page's notation, downloads named by exercise and course, the
diagnostic drill-down by named mistake, the account's own page, the favicon and the skip link,
and a roster whose wrong lines do not block its good ones."""

import datetime as dt
import html
import re
import zoneinfo

from course_data import marked_course, submit  # noqa: F401 (a fixture)
from helpers import change_settings, logged_in
from sqlalchemy import select
from test_roster import HEADER, upload, users, wrong_lines

from server.core.models import (
    Allowance,
    CheckResult,
    DiagnosticResult,
    Exercise,
    GradingRun,
    SetGrade,
    Submission,
    User,
    utcnow,
)
from server.core.users import add_user

PAGE = "/courses/pytorch/staff/students/ana/exercises/autograd-q"
ZONE = "Europe/Madrid"


def with_session(app, change):
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        return change(session)


def ids(session) -> tuple[User, Exercise]:
    ana = session.scalar(select(User).where(User.username == "ana"))
    exercise = session.scalar(select(Exercise).where(Exercise.slug == "autograd-q"))
    return ana, exercise


def staffed_app(course, deadline: dt.datetime | None = None):
    change_settings(course, TIMEZONE=ZONE)

    def setup(session):
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        _ana, exercise = ids(session)
        exercise.deadline = deadline or utcnow() + dt.timedelta(days=5)

    with_session(course, setup)
    return course


def grant(app, **fields):
    def add(session):
        ana, exercise = ids(session)
        session.add(Allowance(user_id=ana.id, exercise_id=exercise.id, **fields))

    with_session(app, add)


# --- a removal is a step apart from Save, confirmed on its own page ------------------------------


def test_removing_an_exception_is_a_separate_action_confirmed_first(course):
    app = staffed_app(course)
    grant(app, deadline=utcnow() + dt.timedelta(days=9), extra_attempts=2, comment="")
    prof, token = logged_in(app, "prof")
    page = prof.get(PAGE).text
    save_form = re.search(
        r'<form method="post" action="%s">.*?</form>' % re.escape(PAGE), page, re.S
    )
    assert "Remove" not in save_form.group(0)  # not beside Save, in its form
    # the page's button only leads to the confirmation: a GET, a secondary (not the blue) button
    removal = re.search(
        r'<form method="get" action="%s/remove">\s*<button type="submit" '
        r'class="secondary">Remove the exception…</button>' % re.escape(PAGE),
        page,
    )
    assert removal is not None
    confirm = prof.get(PAGE + "/remove")
    assert (
        confirm.status_code == 200
        and len(with_session(app, lambda s: s.scalars(select(Allowance)).all())) == 1
    )  # looking at it removes nothing
    assert "Remove the exception?" in confirm.text and "Cancel: keep it" in confirm.text
    assert f'href="{PAGE}"' in confirm.text and "+2" not in confirm.text
    removed = prof.post(PAGE + "/remove", data={"csrf_token": token}, follow_redirects=True)
    assert "The exception for Ana García is removed." in removed.text
    assert with_session(app, lambda s: s.scalars(select(Allowance)).all()) == []
    # nothing left to confirm (an old tab, a bookmark): said, with the way back
    gone = prof.get(PAGE + "/remove")
    assert gone.status_code == 200 and "has no exception on this exercise" in gone.text
    assert "<button" not in gone.text.split("<main", 1)[1] and f'href="{PAGE}"' in gone.text


def test_removing_a_grade_or_a_score_set_by_hand_is_confirmed_first(marked_course):  # noqa: F811
    app, made = marked_course
    prof, token = logged_in(app, "prof")
    adjusted = made["ana-q-1"]
    prof.post(
        f"/courses/pytorch/staff/submissions/{adjusted}/override",
        data={"csrf_token": token, "score": "6", "comment": "partial credit"},
    )
    removal = f"/courses/pytorch/staff/submissions/{adjusted}/override/remove"
    assert (
        f'<form method="get" action="{removal}">'
        in prof.get(f"/courses/pytorch/submissions/{adjusted}").text
    )
    confirm = prof.get(removal).text
    assert "Go back to the automatic score of submission" in confirm and "6 / 10" in confirm
    assert with_session(app, lambda s: s.get(Submission, adjusted).override_score) == 6
    prof.post(removal, data={"csrf_token": token})
    assert with_session(app, lambda s: s.get(Submission, adjusted).override_score) is None

    grade_page = "/courses/pytorch/staff/students/ana/exercises/autograd-q/grade"
    prof.post(grade_page, data={"csrf_token": token, "score": "7", "comment": "seen in person"})
    confirm = prof.get(grade_page + "/remove").text
    assert "Remove the grade set by hand?" in confirm and "7 / 10" in confirm
    assert len(with_session(app, lambda s: s.scalars(select(SetGrade)).all())) == 1
    prof.post(grade_page + "/remove", data={"csrf_token": token})
    assert with_session(app, lambda s: s.scalars(select(SetGrade)).all()) == []


# --- the comment of a score set by hand is inline Markdown, safely --------------------------------


def test_a_comment_set_by_hand_reads_as_inline_markdown_and_never_as_html(marked_course):  # noqa: F811
    app, made = marked_course
    prof, token = logged_in(app, "prof")
    comment = "**Good** work, but `x.sum()` <script>alert(1)</script>"
    prof.post(
        f"/courses/pytorch/staff/submissions/{made['ana-q-1']}/override",
        data={"csrf_token": token, "score": "5", "comment": comment},
    )
    prof.post(
        "/courses/pytorch/staff/students/bea/exercises/autograd-q/grade",
        data={"csrf_token": token, "score": "8", "comment": comment},
    )
    rendered = "<strong>Good</strong> work, but <code>x.sum()</code> &lt;script&gt;"
    ana, _token = logged_in(app, "ana")
    assert rendered in ana.get(f"/courses/pytorch/submissions/{made['ana-q-1']}").text
    bea, _token = logged_in(app, "bea")
    assert rendered in bea.get("/courses/pytorch/exercises/autograd-q").text
    staff_page = prof.get("/courses/pytorch/staff/students/bea/exercises/autograd-q").text
    shown = re.search(r'<div class="pre">(.*?)</div>', staff_page, re.S).group(1)
    assert rendered in shown and "**Good**" not in shown and "<script>" not in staff_page


# --- deadlines with their time zone; the exception's date as the page writes dates ----------------


def test_deadlines_say_their_time_zone(course):
    winter = dt.datetime(2030, 1, 31, 17, 0, tzinfo=dt.timezone.utc)
    app = staffed_app(course, winter)
    prof, _token = logged_in(app, "prof")
    assert "31 Jan 2030, 18:00 CET" in prof.get(PAGE).text
    assert "31 Jan 2030, 18:00 CET" in prof.get("/courses/pytorch/staff/").text
    ana, _token = logged_in(app, "ana")
    assert "31 Jan 2030, 18:00 CET" in ana.get("/courses/pytorch/exercises/autograd-q").text
    assert "31 Jan 2030, 18:00 CET" in ana.get("/courses/pytorch/").text


def test_the_exception_form_takes_dates_in_the_courses_time_zone_with_a_date_picker(course):
    deadline = dt.datetime(2030, 1, 31, 17, 0, tzinfo=dt.timezone.utc)
    app = staffed_app(course, deadline)
    prof, token = logged_in(app, "prof")
    page = prof.get(PAGE).text
    field = re.search(r'<input [^>]*name="deadline"[^>]*>', page).group(0)
    assert 'type="datetime-local"' in field and 'value=""' in field
    assert "New deadline (Europe/Madrid time)" in page
    assert "The date and time are the course's, in Europe/Madrid time." in html.unescape(page)
    madrid = zoneinfo.ZoneInfo(ZONE)
    for typed, lang, local in [
        ("7 Feb 2030, 18:00", "en", dt.datetime(2030, 2, 7, 18)),
        ("9 feb 2030, 9:30 CET", "es", dt.datetime(2030, 2, 9, 9, 30)),
        ("2030-02-10T20:15", "en", dt.datetime(2030, 2, 10, 20, 15)),
    ]:
        sent = prof.post(f"{PAGE}?lang={lang}", data={"csrf_token": token, "deadline": typed})
        assert sent.status_code == 303, typed
        stored = with_session(app, lambda s: s.scalar(select(Allowance.deadline)))
        assert stored == local.replace(tzinfo=madrid)
    # shown again in the course's time, in the picker
    assert 'value="2030-02-10T20:15"' in prof.get(PAGE).text
    for typed in ["7 Feb 2030, 18:00 CEST", "31 Feb 2030, 18:00", "7 Fbr 2030, 18:00", "tomorrow"]:
        refused = prof.post(PAGE, data={"csrf_token": token, "deadline": typed})
        assert refused.status_code == 400, typed
        assert (
            "must be a date and a time as this page writes them, in Europe/Madrid time, "
            "such as 7 Feb 2030, 18:00 CET" in html.unescape(refused.text)
        )


# --- downloads named by exercise, course and kind -------------------------------------------------


def test_downloads_are_named_by_exercise_and_course(marked_course):  # noqa: F811
    app, _made = marked_course
    ana, _token = logged_in(app, "ana")
    starter = ana.get("/courses/pytorch/exercises/autograd-q/files/starter.py")
    assert starter.headers["Content-Disposition"] == "attachment; filename=autograd_q.py"
    other = ana.get("/courses/pytorch/exercises/metrics/files/starter.py")
    assert other.headers["Content-Disposition"] == "attachment; filename=metrics.py"
    assert ">autograd_q.py</a>" in ana.get("/courses/pytorch/exercises/autograd-q").text
    prof, _token = logged_in(app, "prof")
    names = {
        prof.get(f"/courses/pytorch/staff/{path}").headers["Content-Disposition"]
        for path in ("grades.csv", "grades-excel.csv")
    }
    assert names == {
        "attachment; filename=pytorch-grades.csv",
        "attachment; filename=pytorch-grades-excel.csv",
    }


# --- the drill-down shows the hint, by named mistake ----------------------------------------------


def named_mistakes(app, made):
    """ana's first submission: a known wrong program's words; bea's and carl's: one hint each."""

    def add(session):
        carl = session.scalar(select(User).where(User.username == "carl"))
        _ana, exercise = ids(session)
        for submission_id, hint, program in [
            (made["ana-q-1"], "Your gradient is the one of `Q.sum()`", "q_sum"),
            (made["bea-q"], "The sign is **flipped**", None),
        ]:
            diagnostic = session.scalar(
                select(DiagnosticResult)
                .join(CheckResult)
                .join(GradingRun)
                .where(GradingRun.submission_id == submission_id)
            )
            diagnostic.hint = hint
            diagnostic.details = {"wrong_program": program} if program else {}
            diagnostic.translations = {"es": {"message": "en español", "hint": hint + " (es)"}}
        late = submit(session, carl, exercise, 2, codes=["grad-sign-flipped"], minutes=9)
        session.scalar(
            select(DiagnosticResult)
            .join(CheckResult)
            .join(GradingRun)
            .where(GradingRun.submission_id == late.id)
        ).hint = "The sign is **flipped**"

    with_session(app, add)


def test_the_drill_down_shows_the_hint_and_groups_by_named_mistake(marked_course):  # noqa: F811
    app, made = marked_course
    named_mistakes(app, made)
    prof, _token = logged_in(app, "prof")
    page = prof.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped"
    ).text
    sections = re.findall(r'<section class="card table-wrap".*?</section>', page, re.S)
    assert len(sections) == 2
    # the mistake most students made first, its hint as inline Markdown, its count
    assert "The sign is <strong>flipped</strong>" in sections[0] and "2 students" in sections[0]
    assert "Bea" in sections[0] and "Carl Ruiz" in sections[0] and "Ana" not in sections[0]
    assert "Your gradient is the one of <code>Q.sum()</code>" in sections[1]
    assert "1 student" in sections[1] and "q_sum" in sections[1] and "Ana García" in sections[1]
    assert "3 submissions got this diagnostic" in page
    spanish = prof.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped?lang=es"
    ).text
    assert "The sign is <strong>flipped</strong> (es)" in spanish


# --- the account's own page -----------------------------------------------------------------------


def test_account_opens_the_accounts_page_with_its_sections(course):
    ana, _token = logged_in(course, "ana")
    home = ana.get("/courses/pytorch/").text
    assert '<a href="/account/">Account</a>' in home
    page = ana.get("/account/").text
    for heading in ("Mail notices", "Password", "API tokens"):
        assert f">{heading}</h2>" in page
    for link in ("/account/notices", "/account/password", "/account/tokens"):
        assert f'href="{link}"' in page


# --- a favicon and a skip link on every page ------------------------------------------------------


def test_every_page_has_a_favicon_and_a_skip_link_first(course):
    ana, _token = logged_in(course, "ana")
    for path in ("/courses/pytorch/", "/account/", "/login", "/courses/pytorch/no-such-page"):
        page = ana.get(path).text
        assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page, path
        body = page.split("<body>", 1)[1].lstrip()
        assert body.startswith('<a class="skip-link" href="#content">Skip to content</a>'), path
        assert '<main id="content" tabindex="-1"' in page
    icon = ana.get("/static/favicon.svg")
    assert icon.status_code == 200 and icon.data.startswith(b"<svg")


# --- a roster's wrong lines never block its good ones ---------------------------------------------


def test_a_line_that_is_not_csv_is_listed_and_the_others_imported_once(course):
    def add_user_prof(session):
        return add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")

    with_session(course, add_user_prof)
    client, token = logged_in(course, "prof")
    broken = (
        HEADER + 'carl,Carl,c@uni.es,student\ndani,"Dani" Ruiz,d@uni.es,student\n'
        'eva,"Eva,e@uni.es,student\nfede,Fede,f@uni.es,student\n'
    )
    preview = upload(client, token, broken.encode())
    errors = wrong_lines(html.unescape(preview.text))
    # each line that does not parse is named, and an open quote does not swallow the lines after it
    assert set(errors) == {"3", "4"}
    assert "not CSV (',' expected after '\"')" in errors["3"]
    assert "not CSV (unexpected end of data)" in errors["4"]
    assert "Import the 2 valid rows" in preview.text
    text = re.search(r'name="roster" value="([^"]*)"', preview.text).group(1)
    imported = client.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": html.unescape(text)},
    )
    assert "2 wrong lines were left out" in imported.text
    assert {"carl", "fede"} <= set(users(course)) and not {"dani", "eva"} & set(users(course))
    # the corrected file again: only what was left out is added
    fixed = HEADER + (
        'carl,Carl,c@uni.es,student\ndani,"Dani"" Ruiz",d@uni.es,student\n'
        "eva,Eva,e@uni.es,student\nfede,Fede,f@uni.es,student\n"
    )
    again = upload(client, token, fixed.encode())
    assert "Add 2 accounts" in again.text and "2 accounts are in this course already" in again.text
    text = re.search(r'name="roster" value="([^"]*)"', again.text).group(1)
    client.post(
        "/courses/pytorch/staff/roster/import",
        data={"csrf_token": token, "roster": html.unescape(text)},
    )
    assert sorted(name for name in users(course) if name in "carl dani eva fede") == [
        "carl",
        "dani",
        "eva",
        "fede",
    ]


def test_wrong_lines_are_said_when_the_import_only_enrols(course):
    def setup(session):
        add_user(session, "prof", "Pilar", "p@uni.es", "instructor", "long-password")
        add_user(session, "other", "Otto", "o@uni.es", "admin", "long-password")

    with_session(course, setup)
    client, token = logged_in(course, "prof")
    text = HEADER + "other,Otto,o@uni.es,student\nbad,Bad,nope,student\n"
    reply = client.post(
        "/courses/pytorch/staff/roster/import",
        follow_redirects=True,
        data={"csrf_token": token, "roster": text},
    )
    # on the page that reports the import, not only in a message that the next page drops
    said = html.unescape(reply.text)
    assert "1 existing account was enrolled in this course: other" in said
    assert "1 wrong line was left out" in said
    assert "<tr><td>3</td><td>user bad: “nope” is not an email address</td></tr>" in said
