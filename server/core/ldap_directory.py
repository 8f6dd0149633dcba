"""The centre's LDAP directory (ldap3): a person checked by a bind as their own entry, and the
members of the groups courses name.

Every exchange runs over TLS whose certificate is checked (ldaps://, or StartTLS on ldap://; a
plain ldap:// only where LDAP_ALLOW_PLAIN says so) and starts with a bind as the service account,
which searches. A password goes to the directory only in a bind as the entry that search found,
never in an anonymous or empty-password bind: a directory takes a DN with an empty password as
an anonymous bind, which "succeeds" (RFC 4513 5.1.2). Whatever the user typed goes into a filter
escaped, so `*)(uid=*` finds no one.

DirectoryUnavailable is the grader's side failing (the directory cannot be reached, refuses the
service account or its certificate): a log-in says so, never "wrong password"."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ldap3 import ANONYMOUS, BASE, NONE, SIMPLE, SUBTREE, Connection, Server, Tls
from ldap3.core.exceptions import LDAPException
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import parse_dn

from server.core.config import Settings
from server.core.directory import Person

log = logging.getLogger(__name__)
GROUP_MEMBER_ATTRIBUTES = ("member", "uniqueMember", "memberUid")  # groupOfNames…, posixGroup
# a bind of an unknown name goes to this entry, which no one has: an unknown name costs the
# round trips a wrong password does
NOBODY = "cn=hpcgrade-no-such-person"
INVALID_CREDENTIALS = 49  # RFC 4511's resultCode
SEARCH_CHUNK = 100  # usernames per search when many members are read


class DirectoryUnavailable(Exception):
    """The directory cannot answer for anyone just now; the message says why (for the log)."""


@dataclass(frozen=True)
class Entry:
    """A person's entry: its DN and what it says of them."""

    dn: str
    username: str
    name: str
    email: str
    given_name: str = ""
    family_name: str = ""


def checked_person(settings: Settings, username: str, password: str) -> Person | None:
    """The person whose entry `username` names, if `password` is theirs (a bind as that entry),
    with their groups; None for a wrong password, an empty one, or a name the directory does
    not know. DirectoryUnavailable where it cannot tell."""
    if not username or not password:
        return None
    with _service_connection(settings) as connection:
        entries = _people(connection, settings, _user_filter(settings, username))
        if len(entries) != 1:
            if len(entries) > 1:
                log.warning(
                    "%d directory entries match the username %r: none logs in",
                    len(entries),
                    username,
                )
            _rebind(connection, f"{NOBODY},{settings.ldap_user_base}", password)
            return None
        entry = entries[0]
        if not _rebind(connection, entry.dn, password):
            return None
        # the groups as the service account reads them (a person may not read groups)
        _rebind(connection, settings.ldap_bind_dn, settings.ldap_bind_password, service=True)
        return _person(entry, _groups_of(connection, settings, entry))


def known_usernames(settings: Settings, usernames: Collection[str]) -> set[str]:
    """Those of these usernames the directory has an entry of (none while LDAP_URL is unset):
    a roster's new accounts that are the directory's people, who log in with its password."""
    if not settings.ldap_url or not usernames:
        return set()
    with _service_connection(settings) as connection:
        entries = _entries_by_username(connection, settings, sorted(usernames))
    return {entry.username for entry in entries} & set(usernames)


def group_members(
    settings: Settings, group_names: Collection[str]
) -> tuple[list[Person], set[str]]:
    """Every member of these groups with the names of the ones (of these) they are in, and the
    groups whose members could be read (a group missing, renamed, or whose members the service
    account may not read is not among them): one search for the groups, then their members'
    entries (by username, many in a search)."""
    if not group_names or not settings.ldap_group_base:
        return [], set()
    with _service_connection(settings) as connection:
        groups_of_dn, groups_of_username, read = _members(connection, settings, group_names)
        usernames = {_username_in(dn, settings) for dn in groups_of_dn} | set(groups_of_username)
        usernames.discard(None)
        entries = _entries_by_username(connection, settings, sorted(usernames))
        # a member DN whose first part is not the username attribute (cn=Ana García,…): read
        known = {entry.dn.lower() for entry in entries}
        for dn in groups_of_dn:
            if dn not in known and _username_in(dn, settings) is None:
                entries += _people(connection, settings, "(objectClass=*)", base=dn, scope=BASE)
    people = {}
    for entry in entries:
        groups = groups_of_dn.get(entry.dn.lower(), set()) | groups_of_username.get(
            entry.username, set()
        )
        if groups:  # an entry found by username but not a member: another person of that uid
            people[entry.username] = _person(entry, groups)
    return sorted(people.values(), key=lambda person: person.username), read


@contextmanager
def _service_connection(settings: Settings) -> Iterator[Connection]:
    """A connection over TLS, bound as the service account (anonymous where none is set)."""
    url, timeout = settings.ldap_url, settings.ldap_timeout_seconds
    tls = Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=settings.ldap_ca_file)
    server = Server(
        url, use_ssl=url.startswith("ldaps://"), tls=tls, get_info=NONE, connect_timeout=timeout
    )
    connection = Connection(server, receive_timeout=timeout, read_only=True, raise_exceptions=False)
    try:
        connection.open()
        if settings.ldap_start_tls:
            connection.start_tls()
        _rebind(connection, settings.ldap_bind_dn, settings.ldap_bind_password, service=True)
        yield connection
    except LDAPException as exc:
        raise DirectoryUnavailable(f"{url}: {exc}") from None
    finally:
        connection.unbind()


def _rebind(
    connection: Connection, dn: str | None, password: str | None, service: bool = False
) -> bool:
    """A bind on the open connection; False where the directory refused it. The service
    account refused is the grader's side failing (DirectoryUnavailable)."""
    if dn is None:  # no service account: an anonymous search
        bound = connection.rebind(authentication=ANONYMOUS)
    else:
        bound = connection.rebind(user=dn, password=password, authentication=SIMPLE)
    if bound:
        return True
    # only invalidCredentials says the password is wrong; busy, unavailable, unwilling… say
    # that the directory cannot tell now
    if service or connection.result.get("result") != INVALID_CREDENTIALS:
        raise DirectoryUnavailable(f"a bind was refused: {connection.result.get('description')}")
    return False


def _user_filter(settings: Settings, username: str) -> str:
    return settings.ldap_user_filter.replace("{username}", escape_filter_chars(username))


def _people(
    connection: Connection,
    settings: Settings,
    search_filter: str,
    base: str | None = None,
    scope: str = SUBTREE,
) -> list[Entry]:
    attributes = [
        settings.ldap_username_attribute,
        settings.ldap_name_attribute,
        settings.ldap_email_attribute,
        settings.ldap_given_name_attribute,
        settings.ldap_family_name_attribute,
    ]
    _search(connection, base or settings.ldap_user_base, search_filter, attributes, scope)
    entries = []
    for found in connection.response or ():
        if found.get("type") != "searchResEntry":
            continue  # a referral
        values = found["attributes"]
        username = _first(values, settings.ldap_username_attribute)
        if username:
            entries.append(
                Entry(
                    found["dn"],
                    username,
                    _first(values, settings.ldap_name_attribute),
                    _first(values, settings.ldap_email_attribute),
                    _first(values, settings.ldap_given_name_attribute),
                    _first(values, settings.ldap_family_name_attribute),
                )
            )
    return entries


def _groups_of(connection: Connection, settings: Settings, entry: Entry) -> set[str]:
    if not settings.ldap_group_base:
        return set()
    search_filter = settings.ldap_group_filter.replace(
        "{dn}", escape_filter_chars(entry.dn)
    ).replace("{username}", escape_filter_chars(entry.username))
    name = settings.ldap_group_name_attribute
    _search(connection, settings.ldap_group_base, search_filter, [name])
    return {
        value
        for found in connection.response or ()
        if found.get("type") == "searchResEntry"
        for value in _all(found["attributes"], name)
    }


def _members(
    connection: Connection, settings: Settings, group_names: Collection[str]
) -> tuple[dict[str, set[str]], dict[str, set[str]], set[str]]:
    """The groups' members: (member DN in lower case → group names, memberUid → group names,
    the groups found with members the service account could read)."""
    name = settings.ldap_group_name_attribute
    wanted = "".join(f"({name}={escape_filter_chars(group)})" for group in sorted(group_names))
    _search(connection, settings.ldap_group_base, f"(|{wanted})", [name, *GROUP_MEMBER_ATTRIBUTES])
    by_dn: dict[str, set[str]] = {}
    by_username: dict[str, set[str]] = {}
    read: set[str] = set()
    for found in connection.response or ():
        if found.get("type") != "searchResEntry":
            continue
        values = found["attributes"]
        names = set(_all(values, name)) & set(group_names)
        member_dns = _all(values, "member") + _all(values, "uniqueMember")
        member_uids = _all(values, "memberUid")
        if member_dns or member_uids:
            read |= names
        for dn in member_dns:
            by_dn.setdefault(dn.lower(), set()).update(names)
        for username in member_uids:
            by_username.setdefault(username, set()).update(names)
    return by_dn, by_username, read


def _entries_by_username(
    connection: Connection, settings: Settings, usernames: list[str]
) -> list[Entry]:
    entries = []
    for start in range(0, len(usernames), SEARCH_CHUNK):
        chunk = usernames[start : start + SEARCH_CHUNK]
        anyone = "".join(_user_filter(settings, username) for username in chunk)
        entries += _people(connection, settings, f"(|{anyone})")
    return entries


def _username_in(dn: str, settings: Settings) -> str | None:
    """The username a member DN names in its first part (uid=ana,ou=people,…), if it does."""
    try:
        attribute, value, _separator = parse_dn(dn)[0]
    except (LDAPException, IndexError):
        return None
    return value if attribute.lower() == settings.ldap_username_attribute.lower() else None


def _search(
    connection: Connection,
    base: str,
    search_filter: str,
    attributes: list[str],
    scope: str = SUBTREE,
) -> None:
    """A search whose entries are in connection.response; a failure other than "no such
    object" is the directory failing."""
    connection.search(base, search_filter, scope, attributes=attributes)
    if connection.result.get("result") not in (0, 32):  # success, noSuchObject
        raise DirectoryUnavailable(
            f"a search under {base} failed: {connection.result.get('description')}"
        )


def _first(values: dict, attribute: str) -> str:
    found = _all(values, attribute)
    return found[0] if found else ""


def _all(values: dict, attribute: str) -> list[str]:
    value = values.get(attribute)
    if value is None:
        return []
    return [str(item) for item in value] if isinstance(value, list) else [str(value)]


def _person(entry: Entry, groups: Collection[str]) -> Person:
    return Person(
        username=entry.username,
        name=entry.name,
        email=entry.email,
        groups=frozenset(groups),
        given_name=entry.given_name,
        family_name=entry.family_name,
    )
