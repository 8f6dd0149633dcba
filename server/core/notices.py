"""Notices: mail that tells people what changed, in the reader's language, as each chose.

Students are told when staff set their grade or a submission's score by hand, grant them an
exception or an accommodation, or when a published regrade changes their grade; if they wish,
when a submission is graded and a day before a deadline they have not met. Instructors are
told when grading fails for the grader's reasons (server/core/notice_rounds.py has those two,
which the beat sends).

A notice is an event and the ids of the rows it tells about (a grade set by hand, an
allowance, a submission). The portal and the workers commit the change first, then send the
task hpcgrade.notify (server/core/queue.py, send_notice), which mails through one connection
here; nothing is mailed while MAIL_SERVER is unset. Each user turns each kind of notice on or
off on their account's page; the kinds they never touched keep DEFAULTS."""

from __future__ import annotations

import datetime as dt
import enum
import zoneinfo
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import babel.dates
import babel.numbers
from flask import current_app
from flask_babel import force_locale, get_locale, ngettext
from flask_babel import gettext as _
from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from server.core.config import app_settings
from server.core.grades import student_grade, student_terms
from server.core.mail import mail_configured, message, send_batch
from server.core.models import (
    Accommodation,
    Allowance,
    Course,
    CourseRole,
    Enrolment,
    Exercise,
    SetGrade,
    Submission,
    User,
)

DEFAULT_LANGUAGE = "en"  # a reader who never chose one


class Kind(str, enum.Enum):
    """What a user may turn on or off."""

    score_set = "score_set"  # a grade, or a submission's score, set by hand
    exception = "exception"  # an exception granted or changed
    regrade = "regrade"  # a published regrade changed their grade
    graded = "graded"  # a submission of theirs is graded
    deadline = "deadline"  # a day before a deadline they have not met
    grading_failed = "grading_failed"  # instructors: the grader failed on their course's files


DEFAULTS = {
    Kind.score_set: True,
    Kind.exception: True,
    Kind.regrade: True,
    Kind.graded: False,
    Kind.deadline: False,
    Kind.grading_failed: True,
}
STUDENT_KINDS = (Kind.score_set, Kind.exception, Kind.regrade, Kind.graded, Kind.deadline)
INSTRUCTOR_KINDS = (Kind.grading_failed,)


def wants(user: User, kind: Kind) -> bool:
    return bool(user.notices.get(kind.value, DEFAULTS[kind]))


def kinds_for(session: Session, user: User) -> tuple[Kind, ...]:
    """The notices a user may get: a student's, and the instructors' where they teach a course."""
    teaches = session.scalar(
        select(
            exists().where(
                Enrolment.user_id == user.id, Enrolment.role == CourseRole.instructor.value
            )
        )
    )
    return STUDENT_KINDS + (INSTRUCTOR_KINDS if teaches else ())


def choose(user: User, chosen: dict[Kind, bool]) -> None:
    user.notices = {**user.notices, **{kind.value: on for kind, on in chosen.items()}}


# --- what a notice says -----------------------------------------------------------------------


@dataclass(frozen=True)
class Notice:
    """One mail, in its reader's language; `about` is the id of the row it tells about."""

    about: int
    to: str
    subject: str
    body: str


def language(user: User) -> str:
    return user.language or DEFAULT_LANGUAGE


def link(endpoint: str, **values) -> str:
    """A page's address: PUBLIC_URL and the page's path (the path alone without it)."""
    path = current_app.url_map.bind("localhost").build(endpoint, values)
    return (app_settings().public_url or "").rstrip("/") + path


def points(value: float | None, maximum: float | None = None) -> str:
    """ "7.5 / 10" as the reader writes numbers ("7,5 / 10")."""

    def number(x: float | None) -> str:
        return (
            "—"
            if x is None
            else babel.numbers.format_decimal(round(x, 2) + 0.0, "0.##", locale=writing_in())
        )

    return number(value) if maximum is None else f"{number(value)} / {number(maximum)}"


def moment(when: dt.datetime, exercise: Exercise) -> str:
    """A moment in the course's time zone, as the reader writes dates."""
    zone = zoneinfo.ZoneInfo(exercise.course.timezone or app_settings().timezone)
    return babel.dates.format_datetime(when, "d MMM y, HH:mm zzz", tzinfo=zone, locale=writing_in())


def compose(
    reader: User, about: int, subject: Callable[[], str], body: Callable[[], str]
) -> Notice:
    """The notice in the reader's language, with the line that says where to turn it off."""
    with force_locale(language(reader)):
        text = (
            body()
            + "\n-- \n"
            + _(
                "hpcgrade mails you this because of your notice settings; change them at "
                "%(link)s\n",
                link=link("account.notices"),
            )
        )
        return Notice(about, reader.email, subject(), text)


def writing_in() -> str:
    """The language of the notice being written (compose's reader's)."""
    return str(get_locale())


def titled(exercise: Exercise) -> dict[str, str]:
    """The exercise's and course's names in the language of the notice being written."""
    lang = writing_in()
    return {
        "exercise": exercise.title_es if lang == "es" else exercise.title_en,
        "course": exercise.course.title(lang),
    }


def _staff_name(session: Session, user_id: int | None) -> str:
    staff = session.get(User, user_id) if user_id is not None else None
    return staff.name if staff is not None else _("the course's staff")


def grade_set(session: Session, row: SetGrade) -> Notice:
    student, exercise = session.get(User, row.user_id), session.get(Exercise, row.exercise_id)
    grade = student_grade(session, row.user_id, row.exercise_id)
    return compose(
        student,
        row.id,
        lambda: _("Your grade on %(exercise)s was set by hand", **titled(exercise)),
        lambda: _(
            "Hello %(name)s,\n\n%(staff)s set your grade on %(exercise)s (%(course)s): it is "
            "%(grade)s, whatever you submit, until they remove it. Why:\n\n%(comment)s\n\n%(link)s\n",
            name=student.name,
            staff=_staff_name(session, row.set_by),
            grade=points(grade.score, grade.max_score),
            comment=row.comment,
            link=link("portal.exercise", course=exercise.course.slug, slug=exercise.slug),
            **titled(exercise),
        ),
    )


def score_adjusted(session: Session, row: Submission) -> Notice:
    exercise = row.exercise
    return compose(
        row.user,
        row.id,
        lambda: _(
            "The score of your submission #%(id)s to %(exercise)s was adjusted by hand",
            id=row.id,
            **titled(exercise),
        ),
        lambda: _(
            "Hello %(name)s,\n\n%(staff)s adjusted the score of your submission #%(id)s to "
            "%(exercise)s (%(course)s): it is now %(score)s. Why:\n\n%(comment)s\n\n%(link)s\n",
            name=row.user.name,
            staff=_staff_name(session, row.override_by),
            id=row.id,
            score=points(row.override_score, row.max_score),
            comment=row.override_comment or "",
            link=link("portal.submission", course=exercise.course.slug, submission_id=row.id),
            **titled(exercise),
        ),
    )


def exception(session: Session, row: Allowance) -> Notice:
    student, exercise = session.get(User, row.user_id), session.get(Exercise, row.exercise_id)
    granted = student_terms(session, row.user_id, exercise)  # with their accommodation

    def body() -> str:
        lines = []
        if granted.deadline is not None and row.deadline is not None:
            lines.append(_("Your deadline: %(when)s.", when=moment(granted.deadline, exercise)))
        if row.extra_attempts:
            lines.append(_("Your attempts: %(num)s in all.", num=granted.max_attempts))
        if row.comment:
            lines.append(row.comment)
        return _(
            "Hello %(name)s,\n\n%(staff)s granted you an exception on %(exercise)s "
            "(%(course)s).\n\n%(terms)s\n\n%(link)s\n",
            name=student.name,
            staff=_staff_name(session, row.granted_by),
            terms="\n".join(lines),
            link=link("portal.exercise", course=exercise.course.slug, slug=exercise.slug),
            **titled(exercise),
        )

    return compose(
        student,
        row.id,
        lambda: _("You have an exception on %(exercise)s", **titled(exercise)),
        body,
    )


def accommodation(session: Session, row: Accommodation) -> Notice:
    student, course = session.get(User, row.user_id), session.get(Course, row.course_id)

    def body() -> str:
        lines = []
        if row.extra_days:
            lines.append(
                ngettext(
                    "Every deadline of the course is %(num)s day later for you.",
                    "Every deadline of the course is %(num)s days later for you.",
                    row.extra_days,
                )
            )
        if row.attempts_factor != 1:
            lines.append(
                _(
                    "Every limit of attempts is %(factor)s times the exercise's for you, "
                    "rounded up.",
                    factor=points(row.attempts_factor),
                )
            )
        if row.comment:
            lines.append(row.comment)
        return _(
            "Hello %(name)s,\n\n%(staff)s granted you an accommodation in %(course)s, on "
            "every exercise.\n\n%(terms)s\n\nEach exercise's page shows your deadline and "
            "attempts: %(link)s\n",
            name=student.name,
            staff=_staff_name(session, row.granted_by),
            terms="\n".join(lines),
            course=course.title(writing_in()),
            link=link("portal.index", course=course.slug),
        )

    return compose(
        student,
        row.id,
        lambda: _("You have an accommodation in %(course)s", course=course.title(writing_in())),
        body,
    )


def regraded(session: Session, row: Submission) -> Notice:
    """`row`: the submission whose score is the student's new grade."""
    exercise = row.exercise
    grade = student_grade(session, row.user_id, row.exercise_id)
    return compose(
        row.user,
        row.id,
        lambda: _("Your grade on %(exercise)s changed", **titled(exercise)),
        lambda: _(
            "Hello %(name)s,\n\nthe submissions to %(exercise)s (%(course)s) were graded again, and "
            "your grade changed: it is now %(grade)s.\n\n%(link)s\n",
            name=row.user.name,
            grade=points(grade.score, grade.max_score),
            link=link("portal.exercise", course=exercise.course.slug, slug=exercise.slug),
            **titled(exercise),
        ),
    )


def graded(session: Session, row: Submission) -> Notice:
    exercise = row.exercise
    return compose(
        row.user,
        row.id,
        lambda: _("Submission #%(id)s to %(exercise)s is graded", id=row.id, **titled(exercise)),
        lambda: _(
            "Hello %(name)s,\n\nyour submission #%(id)s to %(exercise)s (%(course)s) is graded: "
            "%(score)s.\n\n%(link)s\n",
            name=row.user.name,
            id=row.id,
            score=points(row.counted_score, row.max_score),
            link=link("portal.submission", course=exercise.course.slug, submission_id=row.id),
            **titled(exercise),
        ),
    )


@dataclass(frozen=True)
class Event:
    """What hpcgrade.notify is told about: the kind readers turn on or off, the table of the
    ids (each row's user_id is its reader), and what the notice says."""

    kind: Kind
    table: type[SetGrade] | type[Submission] | type[Allowance] | type[Accommodation]
    notice: Callable[[Session, Any], Notice]


EVENTS = {
    "grade_set": Event(Kind.score_set, SetGrade, grade_set),
    "score_adjusted": Event(Kind.score_set, Submission, score_adjusted),
    "exception": Event(Kind.exception, Allowance, exception),
    "accommodation": Event(Kind.exception, Accommodation, accommodation),
    "regraded": Event(Kind.regrade, Submission, regraded),
    "graded": Event(Kind.graded, Submission, graded),
}


def notify(session: Session, event: str, ids: Iterable[int]) -> int:
    """Mail the notices of `event` about these rows to their readers who want them, through one
    connection; how many went out. A row gone since (an exception removed) tells nothing.
    MailAway when the server cannot be reached, naming the ids not mailed yet."""
    if not mail_configured():
        return 0
    what = EVENTS[event]
    rows = session.scalars(
        select(what.table).where(what.table.id.in_(list(ids))).order_by(what.table.id)
    ).all()
    notices = [
        what.notice(session, row)
        for row in rows
        if wants(session.get(User, row.user_id), what.kind)
    ]
    return deliver(session, notices)


def deliver(session: Session, notices: list[Notice]) -> int:
    """Send these through one connection; how many the server took (a refused address is
    skipped), counted in `session`'s transaction. MailAway names the `about` ids not sent
    yet."""
    addressed = [(n.about, message(n.to, n.subject, n.body)) for n in notices if n.to]
    return len(addressed) - len(send_batch(session, addressed))
