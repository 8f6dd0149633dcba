"""Accounts and exercises from the web, for instructors and admins: the roster (searched, sorted,
filtered), a roster CSV imported after a preview, one account added, a password reset, and the
exercises synced with their folder: what `hpcgrade users …` and `hpcgrade exercise sync` do.

Admins add and reset any account; instructors students only: one who could make an admin, or
learn an instructor's new password, could become one."""
from __future__ import annotations

from urllib.parse import quote

from flask import (Blueprint, abort, current_app, flash, g, redirect, render_template, request,
                   url_for)
from flask_babel import gettext as _, lazy_gettext as _l, ngettext
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from .auth import db, staff_required
from .catalogue import ExerciseConfigError, load_catalogue
from .exercises import sync_exercises
from .listing import arrange, by_name, by_username, requested_listing
from .models import Role, User
from .spreadsheet import cell, csv_text, for_excel
from .users import (ROLES, ROSTER_COLUMNS, UserError, add_user, create_accounts, decode_roster,
                    new_password, read_roster, set_password)

blueprint = Blueprint("roster", __name__, url_prefix="/staff/roster")
ROLE_NAMES = {"student": _l("student"), "instructor": _l("instructor"), "admin": _l("admin")}
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
    (server/listing.py): the students first, then the staff."""
    listing = requested_listing(SORT_KEYS, FILTERS)
    everyone = db().scalars(select(User)).all()
    shown = arrange(everyone, listing, lambda user: user, SORT_KEYS, FILTERS)
    sections = [(_("Students"), [user for user in shown if user.role == Role.student.value]),
                (_("Staff"), [user for user in shown if user.role != Role.student.value])]
    return render_template("staff/roster.html", listing=listing, columns=COLUMNS,
                           sections=sections, shown=len(shown), total=len(everyone),
                           role_names=ROLE_NAMES, addable=addable_roles(), limit_kb=_limit_kb())


def _limit_kb() -> int:
    # the request limit (app.py) lets a file of MAX_UPLOAD_KB through, and the preview's form
    # sends the text back in one field of about its size
    return current_app.config["MAX_UPLOAD_KB"]


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
    """The previewed roster, checked again and imported in one transaction, or not at all."""
    text = request.form.get("roster", "")
    try:
        plan = read_roster(db(), text, addable_roles())
    except UserError as exc:
        return _refused(_("Nothing was imported: %(problem)s.", problem=str(exc)))
    if plan.errors:
        flash(_("The roster has wrong lines: nothing was imported."), "error")
        return render_template("staff/roster_preview.html", plan=plan, text=text,
                               filename="", role_names=ROLE_NAMES), 400
    if not plan.new:
        flash(_("Every account of the roster exists already: nothing to add."), "info")
        return redirect(url_for(".roster"), 303)
    created = create_accounts(db(), plan.new)
    try:
        db().commit()
    except IntegrityError:  # an account of the roster was added since it was checked
        db().rollback()
        return _refused(_("Some of these accounts were added meanwhile: nothing was imported. "
                          "Upload the roster again."))
    return _passwords(created, ngettext("%(num)s account added", "%(num)s accounts added",
                                        len(created)))


@blueprint.route("/add", methods=["GET", "POST"])
def add():
    if request.method == "GET":
        return _add_form({"role": Role.student.value})
    form = {column: request.form.get(column, "").strip() for column in ROSTER_COLUMNS}
    if form["role"] not in addable_roles():
        flash(_("Only an admin may add instructors and admins."), "error")
        return _add_form(form, 403)
    password = new_password()
    try:
        user = add_user(db(), form["username"], form["name"], form["email"], form["role"],
                        password)
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
    return _passwords([(user, password)], _("Account added"))


def _add_form(form: dict, status: int = 200):
    return render_template("staff/roster_add.html", form=form, addable=addable_roles(),
                           role_names=ROLE_NAMES), status


@blueprint.route("/<username>/password", methods=["GET", "POST"])
def reset_password(username: str):
    """A new, generated password for someone who lost theirs; every session of theirs ends and
    their API tokens are revoked."""
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
    password = new_password()
    revoked = set_password(db(), user, password)
    db().commit()
    flash(ngettext("%(num)s API token of %(username)s was revoked.",
                   "%(num)s API tokens of %(username)s were revoked.", revoked,
                   username=user.username), "ok")
    return _passwords([(user, password)], _("Password of %(username)s reset",
                                            username=user.username))


def _passwords(accounts, heading: str):
    """The new passwords, shown once (and as a CSV made inside the page, which the server never
    serves again): this response is not to be stored anywhere. The CSV is for a spreadsheet
    (server/spreadsheet.py): Excel's, in the reader's language; no name in it runs as a formula."""
    sheet = csv_text([["username", "name", "email", "password"],
                      *([cell(account.username), cell(account.name), cell(account.email),
                         cell(password)] for account, password in accounts)],
                     for_excel(g.lang))
    download = "data:text/csv;charset=utf-8," + quote(sheet)
    page = render_template("staff/roster_passwords.html", accounts=accounts, heading=heading,
                           download=download)
    return page, 200, {"Cache-Control": "no-store"}


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
