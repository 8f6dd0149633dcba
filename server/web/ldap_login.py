"""Log-in through the centre's directory (LDAP_URL): a username that is no local account's is
checked by a bind as its directory entry; the first log-in makes the account, and every log-in
enrols it as its groups say (server/core/directory.py).

A local account's username never reaches the directory, and a directory entry of that name never
takes the account over: the demo's, guests' and break-glass admins' accounts log in while the
directory is down."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.config import app_settings
from server.core.directory import account_for, apply_groups
from server.core.ldap_directory import checked_person
from server.core.models import AuthSource, User
from server.core.users import USERNAME


def through_directory(session: Session, username: str) -> bool:
    """Whether this username's password is the directory's to check (the directory is set up
    and the name is not a local account's)."""
    if not app_settings().ldap_url:
        return False
    source = session.scalar(select(User.auth_source).where(User.username == username))
    return source != AuthSource.local.value


def directory_user(session: Session, username: str, password: str) -> User | None:
    """The account of the directory's person whose password this is, made on their first
    log-in, their enrolments as their groups say now, committed; None: the directory says
    no. Raises DirectoryUnavailable (the directory cannot tell) and DirectoryError (the person
    may not have an account here this way)."""
    # the directory folds case, width and some invisible characters: the name hpcgrade would
    # take, or the per-account throttle would count each spelling apart
    if not USERNAME.fullmatch(username):
        return None
    person = checked_person(app_settings(), username, password)
    if person is None:
        return None
    user = account_for(session, person, AuthSource.ldap)
    apply_groups(session, user, person.groups)
    session.commit()
    return user
