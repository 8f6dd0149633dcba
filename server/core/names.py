"""People's names: the given and family names kept apart, as a class list sorts by family name,
and the full name a page shows.

Where only a full name is known (an account made before the two were kept, a directory entry
or a roster row with one name column), `split_name` guesses the parts. The guess suits Spanish
names with two surnames and particles ("María José de la Fuente Ruiz": "María José" / "de la
Fuente Ruiz") and "Family, Given" written with a comma; it is a guess, which the roster, the
directory's givenName and sn, and the single sign-on's given_name and family_name put right."""

from __future__ import annotations

import unicodedata
from typing import Protocol

# words that belong to the surname after them: "de la Fuente" is one surname
PARTICLES = frozenset({"da", "das", "de", "del", "der", "di", "do", "dos", "du", "la", "las"})
PARTICLES |= {"le", "los", "san", "santa", "van", "von", "y", "i"}


class Named(Protocol):
    username: str
    name: str
    given_name: str
    family_name: str


def folded(text: str) -> str:
    """Text as a search and a sort compare it: "Álvarez" and "alvarez" are the same."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def _surnames(words: list[str]) -> list[list[str]]:
    """The words grouped into names, each particle with the name after it."""
    groups: list[list[str]] = []
    pending: list[str] = []
    for word in words:
        pending.append(word)
        if word.casefold() not in PARTICLES:
            groups.append(pending)
            pending = []
    if pending:  # a particle at the end ("Ana de"): a word of its own
        groups.append(pending)
    return groups


def split_name(full: str) -> tuple[str, str]:
    """(given, family) guessed from a full name: "Family, Given" as written; else one name
    is a given name, two are given and family, three are a given name and two surnames, four or
    more two given names and the rest surnames (a particle goes with the name after it)."""
    full = " ".join(full.split())
    if "," in full:
        family, _, given = full.partition(",")
        return given.strip(), family.strip()
    groups = _surnames(full.split(" ")) if full else []
    given_count = {0: 0, 1: 1, 2: 1, 3: 1}.get(len(groups), 2)
    given = " ".join(" ".join(group) for group in groups[:given_count])
    family = " ".join(" ".join(group) for group in groups[given_count:])
    return given, family


def full_name(given: str, family: str) -> str:
    return " ".join(part for part in (given.strip(), family.strip()) if part)


def name_parts(name: str, given: str, family: str) -> tuple[str, str, str]:
    """(name, given, family) from what a roster, the directory or the provider gave: parts
    given make the name where it is missing, and a name alone is split."""
    name, given, family = name.strip(), given.strip(), family.strip()
    if family and not given and name.endswith(family):  # a directory's cn and sn alone
        given = name.removesuffix(family).strip()
    if given or family:
        return name or full_name(given, family), given, family
    return (name, *split_name(name))


def by_family_name(user: Named) -> tuple[str, str, str, str]:
    """Every list of people sorts by family name, then given name, accents and case aside
    ("Álvarez" beside "Alvarez"); the username breaks ties."""
    family = user.family_name or user.name
    return folded(family), folded(user.given_name), family.casefold(), user.username
