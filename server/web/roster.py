"""A course's people and exercises from the web: its roster (searched, sorted, filtered), a
roster CSV imported after a preview, one account added or enrolled, a password reset, and the
course's exercises synced with their folder: what `hpcgrade users …` and `hpcgrade exercise
sync` do.

A new account, and one whose password is reset, waits for its owner to set a password with its
set-password link (server/core/links.py): shown here, mailed where mail is set up, and shown again
while the account waits. An existing account added to a course is enrolled in it: a student of
two courses is one account.

Who may do what, in the course: an admin adds any course role and resets anyone's password; an
instructor adds students and teaching assistants, and resets the passwords of students who are
nothing more anywhere (one who could set a teaching assistant's password with its link, or an
admin's, could become one); a teaching assistant reads the roster and changes nothing. Admins
are made with the command line only."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import quote

from flask import (
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import ngettext
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from server.core import task_names
from server.core.catalogue import ExerciseConfigError
from server.core.config import app_settings
from server.core.courses import COURSE_ROLES, course_catalogue
from server.core.exercises import sync_exercises
from server.core.ldap_directory import DirectoryUnavailable, known_usernames
from server.core.links import make_link
from server.core.mail import mail_configured, server_problem
from server.core.models import AuthSource, CourseRole, Enrolment, User
from server.core.names import by_family_name
from server.core.roster import (
    FIELDS,
    TEMPLATE,
    chosen_columns,
    create_accounts,
    decode_roster,
    enrol_accounts,
    guess_columns,
    missing_columns,
    read_roster,
    roster_header,
)
from server.core.users import (
    ACCOUNT_FIELDS,
    NO_PASSWORD,
    ROLES,
    UserError,
    add_or_enrol,
    clear_password,
    has_password,
    members,
    role_refused,
    students_only,
    user_role,
)
from server.web.auth import db, instructor_required
from server.web.courses import ROLE_NAMES
from server.web.listing import arrange, by_name, by_username, requested_listing
from server.web.spreadsheet import cell, csv_text, for_excel
from server.web.staff_pages import staff_blueprint

log = logging.getLogger(__name__)
blueprint = staff_blueprint("roster", __name__, "/roster")


@dataclass(frozen=True)
class Member:
    """An account of the course's roster, with its role there (admin for an admin)."""

    user: User
    role: str


ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
COLUMNS = {
    "username": _l("Username"),
    "name": _l("Name"),
    "email": _l("Email"),
    "role": _l("Role"),
    "added": _l("Added"),
}
SORT_KEYS = {
    "name": lambda member: by_name(member.user),
    "username": lambda member: by_username(member.user),
    "email": lambda member: member.user.email.casefold(),
    "role": lambda member: (ROLE_RANK[member.role], by_name(member.user)),
    "added": lambda member: member.user.created_at,
}
FILTERS = {role: (lambda member, role=role: member.role == role) for role in COURSE_ROLES}


def addable_roles() -> tuple[str, ...]:
    """The roles the user may give in this course."""
    if g.user.is_admin:
        return COURSE_ROLES
    if g.role == CourseRole.instructor.value:
        return CourseRole.student.value, CourseRole.ta.value
    return ()


def course_members() -> list[Member]:
    found = db().execute(
        select(User, Enrolment)
        .join(Enrolment, Enrolment.user_id == User.id)
        .where(Enrolment.course_id == g.course.id)
    )
    return [Member(user, user_role(user, enrolment)) for user, enrolment in found]


def resettable() -> set[int]:
    """The ids of the accounts whose password the user may reset from this course's roster
    (local accounts: a directory's password is not ours to reset)."""
    if g.user.is_admin:
        found = members(g.course)
    elif g.role == CourseRole.instructor.value:
        found = students_only(g.course)
    else:
        return set()
    local = found.where(
        Enrolment.user_id.in_(select(User.id).where(User.auth_source == AuthSource.local.value))
    )
    return set(db().scalars(local)) - {g.user.id}


@blueprint.get("/")
def roster():
    """The course's people, searched, filtered by role and sorted as the gradebook's students
    are (server/web/listing.py): the students first, then the staff."""
    listing = requested_listing(SORT_KEYS, FILTERS)
    everyone = course_members()
    shown = arrange(everyone, listing, lambda member: member.user, SORT_KEYS, FILTERS)
    student = CourseRole.student.value
    sections = [
        (_("Students"), [member for member in shown if member.role == student]),
        (_("Staff"), [member for member in shown if member.role != student]),
    ]
    may_reset = resettable()
    waiting = sum(
        not has_password(member.user) and member.user.id in may_reset for member in everyone
    )
    return render_template(
        "staff/roster.html",
        listing=listing,
        columns=COLUMNS,
        sections=sections,
        shown=len(shown),
        total=len(everyone),
        role_names=ROLE_NAMES,
        filters={role: ROLE_NAMES[role] for role in COURSE_ROLES},
        addable=addable_roles(),
        resettable=may_reset,
        limit_kb=_limit_kb(),
        waiting=waiting,
    )


def _limit_kb() -> int:
    # the request limit (app.py) lets a file of MAX_UPLOAD_KB through, and the preview's form
    # sends the text back in one field of about its size
    return app_settings().max_upload_kb


@blueprint.post("/upload")
@instructor_required
def upload():
    """A roster file, read and checked: the preview of what importing it would change, with
    its columns as guessed from its header."""
    file = request.files.get("roster")
    if file is None or not file.filename:
        return _refused(_("Choose the roster's CSV file."))
    data = file.read(_limit_kb() * 1024 + 1)
    if len(data) > _limit_kb() * 1024:
        return _refused(too_large(_limit_kb()))
    try:
        text = decode_roster(data)
        _delimiter, header = roster_header(text)
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    return _preview(text, file.filename, header, guess_columns(header))


@blueprint.post("/preview")
@instructor_required
def preview():
    """The same roster again, read with the columns the instructor chose."""
    text = request.form.get("roster", "")
    try:
        _delimiter, header = roster_header(text)
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    columns = chosen_columns(header, request.form)
    return _preview(text, request.form.get("filename", ""), header, columns)


def _preview(text: str, filename: str, header: list[str], columns: dict[str, int]):
    """The preview page: the columns (to confirm or change) and, once they name what a roster
    needs, what importing it would change."""
    plan, problem = None, None
    if missing_columns(columns):
        problem = _(
            "Choose the columns that hold the username, the email address and the name "
            "(whole, or given and family names)."
        )
    else:
        try:
            plan = read_roster(db(), text, g.course, addable_roles(), columns)
        except UserError as exc:
            problem = _("Nothing can be imported: %(problem)s.", problem=str(exc))
    return render_template(
        "staff/roster_preview.html",
        plan=plan,
        problem=problem,
        text=text,
        filename=filename,
        header=header,
        columns=columns,
        fields=FIELDS,
        role_names=ROLE_NAMES,
    )


@blueprint.get("/template.csv")
@instructor_required
def template():
    """A roster to fill in: its header and one example row."""
    return (
        TEMPLATE,
        200,
        {
            "Content-Type": "text/csv; charset=utf-8",
            "Content-Disposition": "attachment; filename=roster-template.csv",
        },
    )


def too_large(limit_kb: int) -> str:
    """Also what errors.py answers a request far over the limit with."""
    return _("The roster file is larger than %(kb)s KB.", kb=limit_kb)


def _refused(message: str):
    flash(message, "error")
    return redirect(url_for(".roster"), 303)


@blueprint.post("/import")
@instructor_required
def apply():
    """The previewed roster, read with the columns chosen there and checked again: its new
    accounts added and its existing ones enrolled in one transaction, its wrong lines left out
    and listed again on the page that reports the import."""
    text = request.form.get("roster", "")
    try:
        _delimiter, header = roster_header(text)
        columns = (
            chosen_columns(header, request.form)
            if any(name in request.form for name in FIELDS)
            else guess_columns(header)
        )
        plan = read_roster(db(), text, g.course, addable_roles(), columns)
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    if not plan.new and not plan.enrol:
        flash(
            _("No line of the roster adds a valid account: nothing was imported.")
            if plan.errors
            else _("Every account of the roster is in this course already: nothing to add."),
            "info",
        )
        if not plan.errors:
            return redirect(url_for(".roster"), 303)
        return _links([], _("Roster import"), left_out=plan.errors)
    try:
        in_directory = known_usernames(app_settings(), [row.username for row in plan.new])
    except DirectoryUnavailable as away:
        log.error("a roster import could not ask the directory: %s", away)
        return _refused(
            _(
                "Nothing was imported: the centre's directory cannot be reached to "
                "tell its people from guests. Try again in a few minutes."
            )
        )
    try:
        created = create_accounts(db(), plan.new, g.course, in_directory)
        enrolled = enrol_accounts(db(), plan.enrol, g.course)
        db().commit()
    except IntegrityError:  # an account of the roster was added or enrolled since it was checked
        db().rollback()
        return _refused(
            _(
                "Some of these accounts were added meanwhile: nothing was imported. "
                "Upload the roster again."
            )
        )
    if enrolled:
        _say_enrolled(enrolled)
    if not created and not plan.errors:
        return redirect(url_for(".roster"), 303)
    return _links(
        created,
        ngettext("%(num)s account added", "%(num)s accounts added", len(created))
        if created
        else _("Roster import"),
        mailed=bool(created),
        left_out=plan.errors,
    )


def _say_enrolled(users: list[User]) -> None:
    flash(
        ngettext(
            "%(num)s existing account was enrolled in this course: %(usernames)s",
            "%(num)s existing accounts were enrolled in this course: %(usernames)s",
            len(users),
            usernames=", ".join(user.username for user in users),
        ),
        "ok",
    )


@blueprint.route("/add", methods=["GET", "POST"])
@instructor_required
def add():
    """One account added to the course, or an existing one enrolled in it."""
    if request.method == "GET":
        return _add_form({"role": CourseRole.student.value})
    form = {column: request.form.get(column, "").strip() for column in ACCOUNT_FIELDS}
    if form["role"] in ROLES and form["role"] not in addable_roles():  # else a UserError
        flash(_("Not added: %(problem)s.", problem=role_refused(form["role"])), "error")
        return _add_form(form, 403)
    try:
        in_directory = known_usernames(app_settings(), [form["username"]])
    except DirectoryUnavailable as away:
        log.error("adding an account could not ask the directory: %s", away)
        flash(
            _(
                "Not added: the centre's directory cannot be reached to tell whether "
                "%(username)s is one of its people. Try again in a few minutes.",
                username=form["username"],
            ),
            "error",
        )
        return _add_form(form, 503)
    source = AuthSource.ldap if in_directory else AuthSource.local
    try:
        user, created = add_or_enrol(
            db(),
            form["username"],
            form["name"],
            form["email"],
            form["role"],
            password=None,
            course=g.course,
            auth_source=source,
            given_name=form["given_name"],
            family_name=form["family_name"],
        )
        db().commit()
    except UserError as exc:
        db().rollback()
        flash(_("Not added: %(problem)s.", problem=str(exc)), "error")
        return _add_form(form, 400)
    except IntegrityError:  # added by someone else between the check and the commit
        db().rollback()
        flash(
            _(
                "Not added: %(problem)s.",
                problem=_("user %(username)s already exists", username=form["username"]),
            ),
            "error",
        )
        return _add_form(form, 409)
    if not created:
        flash(
            _(
                "%(username)s had an account already: it is enrolled in this course as "
                "%(role)s, its name, email and password unchanged.",
                username=user.username,
                role=ROLE_NAMES[form["role"]],
            ),
            "ok",
        )
        return redirect(url_for(".roster"), 303)
    return _links([user], _("Account added"), mailed=True)


def _add_form(form: dict, status: int = 200):
    return render_template(
        "staff/roster_add.html", form=form, addable=addable_roles(), role_names=ROLE_NAMES
    ), status


@blueprint.route("/<username>/password", methods=["GET", "POST"])
@instructor_required
def reset_password(username: str):
    """For someone who lost their password: it stops working, every session of theirs ends,
    their API tokens are revoked, and they set a new one with the link this gives. An account
    outside the course is not there for its instructors (404)."""
    user = db().scalar(select(User).where(User.username == username))
    if user is None or not (g.user.is_admin or _in_course(user)):
        abort(404)
    if user.id == g.user.id:
        flash(_("Change your own password here."), "info")
        return redirect(url_for("account.password"), 303)
    if user.auth_source != AuthSource.local.value:
        flash(
            _(
                "%(username)s logs in through the centre's directory or single sign-on: their "
                "password is changed there, not here.",
                username=user.username,
            ),
            "info",
        )
        return redirect(url_for(".roster"), 303)
    if user.id not in resettable():
        abort(403)
    if request.method == "GET":
        return render_template("staff/roster_reset.html", user=user)
    revoked = clear_password(db(), user)
    db().commit()
    flash(
        ngettext(
            "%(num)s API token of %(username)s was revoked.",
            "%(num)s API tokens of %(username)s were revoked.",
            revoked,
            username=user.username,
        ),
        "ok",
    )
    return _links([user], _("Password of %(username)s reset", username=user.username), mailed=True)


def _in_course(user: User) -> bool:
    return db().scalar(members(g.course).where(Enrolment.user_id == user.id)) is not None


@blueprint.get("/waiting")
@instructor_required
def waiting():
    """The links of the course's accounts whose owners have not set a password yet, made again
    (one handed out and lost, or never mailed): those whose password the user may reset."""
    users = sorted(
        db().scalars(
            select(User).where(User.password_hash == NO_PASSWORD, User.id.in_(resettable()))
        ),
        key=by_family_name,
    )
    return _links(users, _("Accounts waiting for a password"))


def _links(
    users: list[User],
    heading: str,
    *,
    mailed: bool = False,
    left_out: Sequence[tuple[int, str]] = (),
):
    """Each account's set-password link (and a CSV of them made inside the page): a link is as
    good as a password while it works, so this response is not to be stored anywhere. The CSV is
    for a spreadsheet (server/web/spreadsheet.py): Excel's, in the reader's language; no name in it
    runs as a formula. `mailed`: each account is mailed its link too, where mail is set up. The
    directory's people need none: they are named, as logging in with its password."""
    directory_people = [user for user in users if user.auth_source != AuthSource.local.value]
    if directory_people:
        flash(
            ngettext(
                "%(usernames)s logs in with the password of the centre's directory: no "
                "link to hand out.",
                "%(num)s accounts log in with the password of the centre's directory: "
                "no link to hand out (%(usernames)s).",
                len(directory_people),
                usernames=", ".join(user.username for user in directory_people),
            ),
            "ok",
        )
        users = [user for user in users if user.auth_source == AuthSource.local.value]
        if not users and not left_out:
            return redirect(url_for(".roster"), 303)
    base_url = app_settings().public_url or request.url_root.rstrip("/")
    accounts = [(user, make_link(user, base_url)) for user in users]
    sheet = csv_text(
        [
            ["username", "name", "email", "link"],
            *(
                [cell(user.username), cell(user.name), cell(user.email), cell(link)]
                for user, link in accounts
            ),
        ],
        for_excel(g.lang),
    )
    download = "data:text/csv;charset=utf-8," + quote(sheet)
    mail = _mail_links([user.id for user in users], base_url) if mailed else None
    page = render_template(
        "staff/roster_links.html",
        accounts=accounts,
        heading=heading,
        download=download,
        mail=mail,
        left_out=left_out,
        days=app_settings().set_password_link_days,
    )
    return page, 200, {"Cache-Control": "no-store"}


def _mail_links(user_ids: list[int], base_url: str) -> tuple[str, str]:
    """Hand the mailing of these accounts' links to a worker (thousands of mails would hold the
    request), once the mail server has answered; what the page says of it: (category, text)."""
    if not mail_configured():
        return "info", _(
            "Mail is not set up on this service: hand each person their link, or the CSV."
        )
    problem = server_problem()
    if problem is not None:
        return "error", _(
            "The links were not mailed, the mail server cannot take them "
            "(%(problem)s): hand each person their link, or the CSV.",
            problem=problem,
        )
    try:
        current_app.extensions["celery"].send_task(
            task_names.MAIL_LINKS, args=[user_ids, base_url, g.lang, g.user.id], retry=False
        )
    except Exception:  # kombu raises many types for a broker that is away
        return "error", _(
            "The links were not mailed: the task queue cannot be reached. Hand "
            "each person their link, or the CSV."
        )
    return "ok", ngettext(
        "The link is being mailed to its address; you get a mail if the server refuses it.",
        "The links are being mailed to their %(num)s addresses; you get a "
        "mail listing any the server refuses.",
        len(user_ids),
    )


@blueprint.post("/exercises/sync")
@instructor_required
def sync():
    """The course's exercises brought in step with its folder, as `hpcgrade exercise sync`
    does."""
    try:
        catalogue = course_catalogue(g.course)
    except ExerciseConfigError as exc:
        flash(
            _("The exercises were not synced, nothing changed: %(problem)s", problem=str(exc)),
            "error",
        )
        return redirect(url_for(".roster"), 303)
    changes = sync_exercises(db(), g.course, catalogue)
    db().commit()
    changed = {kind: ", ".join(slugs) for kind, slugs in changes.items() if slugs}
    if "added" in changed:
        flash(_("Added: %(slugs)s", slugs=changed["added"]), "ok")
    if "updated" in changed:
        flash(_("Updated: %(slugs)s", slugs=changed["updated"]), "ok")
    if "deactivated" in changed:
        flash(_("Withdrawn, their folder is gone: %(slugs)s", slugs=changed["deactivated"]), "ok")
    flash(
        ngettext(
            "%(num)s exercise is in step with its folder.",
            "%(num)s exercises are in step with their folders.",
            len(catalogue),
        ),
        "ok",
    )
    return redirect(url_for(".roster"), 303)
