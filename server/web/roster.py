"""Accounts and exercises from the web, for instructors and admins: the roster (searched, sorted,
filtered), a roster CSV imported after a preview, one account added, a password reset, and the
exercises synced with their folder: what `hpcgrade users …` and `hpcgrade exercise sync` do.

A new account, and one whose password is reset, waits for its owner to set a password with its
set-password link (server/core/links.py): shown here, mailed where mail is set up, and shown again
while the account waits.

Admins add and reset any account; instructors students only: one who could make an admin, or
set an instructor's password with its link, could become one."""
from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote

from flask import (Blueprint, abort, current_app, flash, g, redirect, render_template, request,
                   url_for)
from flask_babel import gettext as _, lazy_gettext as _l, ngettext
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from server.core.catalogue import ExerciseConfigError, load_catalogue
from server.core.config import app_settings
from server.core.exercises import sync_exercises
from server.core.links import make_link
from server.core.mail import mail_configured, server_problem
from server.core.models import CourseRole, User
from server.core.users import (NO_PASSWORD, ROLES, ROSTER_COLUMNS, UserError, add_user,
                               clear_password, create_accounts, decode_roster, has_password,
                               read_roster)
from server.web.auth import db, staff_required
from server.web.courses import ROLE_NAMES
from server.web.listing import arrange, by_name, by_username, requested_listing
from server.web.spreadsheet import cell, csv_text, for_excel

blueprint = Blueprint("roster", __name__, url_prefix="/courses/<course>/staff/roster")
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
COLUMNS = {"username": _l("Username"), "name": _l("Name"), "email": _l("Email"),
           "role": _l("Role"), "added": _l("Added")}
SORT_KEYS = {"name": by_name, "username": by_username,
             "email": lambda user: user.email.casefold(),
             "role": lambda user: (ROLE_RANK.get(user.role, len(ROLES)), by_name(user)),
             "added": lambda user: user.created_at}
FILTERS = {role: (lambda user, role=role: user.role == role) for role in ROLES}


@blueprint.before_request
@staff_required
def only_staff() -> None:
    """Every page here is for instructors and admins; a student gets 403."""


def addable_roles() -> tuple[str, ...]:
    return ROLES if g.user.role == Role.admin.value else (Role.student.value,)


@blueprint.get("/")
def roster():
    """Every account, searched, filtered by role and sorted as the gradebook's students are
    (server/web/listing.py): the students first, then the staff."""
    listing = requested_listing(SORT_KEYS, FILTERS)
    everyone = db().scalars(select(User)).all()
    shown = arrange(everyone, listing, lambda user: user, SORT_KEYS, FILTERS)
    sections = [(_("Students"), [user for user in shown if user.role == Role.student.value]),
                (_("Staff"), [user for user in shown if user.role != Role.student.value])]
    waiting = sum(not has_password(user) and user.role in addable_roles() for user in everyone)
    return render_template("staff/roster.html", listing=listing, columns=COLUMNS,
                           sections=sections, shown=len(shown), total=len(everyone),
                           role_names=ROLE_NAMES, addable=addable_roles(), limit_kb=_limit_kb(),
                           waiting=waiting)


def _limit_kb() -> int:
    # the request limit (app.py) lets a file of MAX_UPLOAD_KB through, and the preview's form
    # sends the text back in one field of about its size
    return app_settings().max_upload_kb


@blueprint.post("/upload")
def upload():
    """A roster file, read and checked: the preview of what importing it would change."""
    file = request.files.get("roster")
    if file is None or not file.filename:
        return _refused(_("Choose the roster's CSV file."))
    data = file.read(_limit_kb() * 1024 + 1)
    if len(data) > _limit_kb() * 1024:
        return _refused(too_large(_limit_kb()))
    try:
        text = decode_roster(data)
        plan = read_roster(db(), text, addable_roles())
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    return render_template("staff/roster_preview.html", plan=plan, text=text,
                           filename=file.filename, role_names=ROLE_NAMES)


def too_large(limit_kb: int) -> str:
    """Also what errors.py answers a request far over the limit with."""
    return _("The roster file is larger than %(kb)s KB.", kb=limit_kb)


def _refused(message: str):
    flash(message, "error")
    return redirect(url_for(".roster"), 303)


@blueprint.post("/import")
def apply():
    """The previewed roster, checked again: its new accounts added in one transaction, its wrong
    lines left out (and listed again)."""
    text = request.form.get("roster", "")
    try:
        plan = read_roster(db(), text, addable_roles())
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    if not plan.new:
        flash(_("No line of the roster adds a valid account: nothing was imported.")
              if plan.errors else
              _("Every account of the roster exists already: nothing to add."), "info")
        return redirect(url_for(".roster"), 303)
    try:
        created = create_accounts(db(), plan.new)
        db().commit()
    except IntegrityError:  # an account of the roster was added since it was checked
        db().rollback()
        return _refused(_("Some of these accounts were added meanwhile: nothing was imported. "
                          "Upload the roster again."))
    return _links(created, ngettext("%(num)s account added", "%(num)s accounts added",
                                    len(created)), mailed=True, left_out=plan.errors)


@blueprint.route("/add", methods=["GET", "POST"])
def add():
    if request.method == "GET":
        return _add_form({"role": Role.student.value})
    form = {column: request.form.get(column, "").strip() for column in ROSTER_COLUMNS}
    if form["role"] not in addable_roles():
        flash(_("Only an admin may add instructors and admins."), "error")
        return _add_form(form, 403)
    try:
        user = add_user(db(), form["username"], form["name"], form["email"], form["role"],
                        password=None)
        db().commit()
    except UserError as exc:
        db().rollback()
        flash(_("Not added: %(problem)s.", problem=str(exc)), "error")
        return _add_form(form, 400)
    except IntegrityError:  # added by someone else between the check and the commit
        db().rollback()
        flash(_("Not added: %(problem)s.", problem=_("user %(username)s already exists",
                                                       username=form["username"])), "error")
        return _add_form(form, 409)
    return _links([user], _("Account added"), mailed=True)


def _add_form(form: dict, status: int = 200):
    return render_template("staff/roster_add.html", form=form, addable=addable_roles(),
                           role_names=ROLE_NAMES), status


@blueprint.route("/<username>/password", methods=["GET", "POST"])
def reset_password(username: str):
    """For someone who lost their password: it stops working, every session of theirs ends,
    their API tokens are revoked, and they set a new one with the link this gives."""
    user = db().scalar(select(User).where(User.username == username))
    if user is None:
        abort(404)
    if user.id == g.user.id:
        flash(_("Change your own password here."), "info")
        return redirect(url_for("account.password"), 303)
    if user.role not in addable_roles():
        abort(403)
    if request.method == "GET":
        return render_template("staff/roster_reset.html", user=user)
    revoked = clear_password(db(), user)
    db().commit()
    flash(ngettext("%(num)s API token of %(username)s was revoked.",
                   "%(num)s API tokens of %(username)s were revoked.", revoked,
                   username=user.username), "ok")
    return _links([user], _("Password of %(username)s reset", username=user.username),
                  mailed=True)


@blueprint.get("/waiting")
def waiting():
    """The links of the accounts whose owners have not set a password yet, made again (one
    handed out and lost, or never mailed)."""
    users = db().scalars(select(User).where(User.password_hash == NO_PASSWORD,
                                            User.role.in_(addable_roles()))
                         .order_by(User.username)).all()
    return _links(users, _("Accounts waiting for a password"))


def _links(users: list[User], heading: str, *, mailed: bool = False,
           left_out: Sequence[tuple[int, str]] = ()):
    """Each account's set-password link (and a CSV of them made inside the page): a link is as
    good as a password while it works, so this response is not to be stored anywhere. The CSV is
    for a spreadsheet (server/web/spreadsheet.py): Excel's, in the reader's language; no name in it
    runs as a formula. `mailed`: each account is mailed its link too, where mail is set up."""
    base_url = app_settings().public_url or request.url_root.rstrip("/")
    accounts = [(user, make_link(user, base_url)) for user in users]
    sheet = csv_text([["username", "name", "email", "link"],
                      *([cell(user.username), cell(user.name), cell(user.email), cell(link)]
                        for user, link in accounts)],
                     for_excel(g.lang))
    download = "data:text/csv;charset=utf-8," + quote(sheet)
    mail = _mail_links([user.id for user in users], base_url) if mailed else None
    page = render_template("staff/roster_links.html", accounts=accounts, heading=heading,
                           download=download, mail=mail, left_out=left_out,
                           days=app_settings().set_password_link_days)
    return page, 200, {"Cache-Control": "no-store"}


def _mail_links(user_ids: list[int], base_url: str) -> tuple[str, str]:
    """Hand the mailing of these accounts' links to a worker (thousands of mails would hold the
    request), once the mail server has answered; what the page says of it: (category, text)."""
    if not mail_configured():
        return "info", _("Mail is not set up on this service: hand each person their link, or "
                         "the CSV.")
    problem = server_problem()
    if problem is not None:
        return "error", _("The links were not mailed, the mail server cannot take them "
                          "(%(problem)s): hand each person their link, or the CSV.",
                          problem=problem)
    try:
        current_app.extensions["celery"].send_task(
            "hpcgrade.mail_links", args=[user_ids, base_url, g.lang, g.user.id], retry=False)
    except Exception:  # kombu raises many types for a broker that is away
        return "error", _("The links were not mailed: the task queue cannot be reached. Hand "
                          "each person their link, or the CSV.")
    return "ok", ngettext("The link is being mailed to its address; you get a mail if the "
                          "server refuses it.",
                          "The links are being mailed to their %(num)s addresses; you get a "
                          "mail listing any the server refuses.", len(user_ids))


@blueprint.post("/exercises/sync")
def sync():
    """The exercises brought in step with their folder, as `hpcgrade exercise sync` does."""
    try:
        catalogue = load_catalogue()
    except ExerciseConfigError as exc:
        flash(_("The exercises were not synced, nothing changed: %(problem)s",
                problem=str(exc)), "error")
        return redirect(url_for(".roster"), 303)
    changes = sync_exercises(db(), catalogue)
    db().commit()
    changed = {kind: ", ".join(slugs) for kind, slugs in changes.items() if slugs}
    if "added" in changed:
        flash(_("Added: %(slugs)s", slugs=changed["added"]), "ok")
    if "updated" in changed:
        flash(_("Updated: %(slugs)s", slugs=changed["updated"]), "ok")
    if "deactivated" in changed:
        flash(_("Withdrawn, their folder is gone: %(slugs)s", slugs=changed["deactivated"]), "ok")
    flash(ngettext("%(num)s exercise is in step with its folder.",
                   "%(num)s exercises are in step with their folders.", len(catalogue)), "ok")
    return redirect(url_for(".roster"), 303)
