"""Search, sort and filter a page's list of students from its query string: ?q= (part of a
username, name or email; neither case nor accents matter), ?sort= (a column), ?order=asc|desc and
?filter=. Done on the server, so that the links can be shared and the page needs no script."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from flask import flash, request, url_for
from flask_babel import gettext as _

from server.core.models import User
from server.core.names import by_family_name, folded

Row = TypeVar("Row")
ORDERS = ("asc", "desc")


@dataclass(frozen=True)
class Listing:
    """What the query string asks for, and what in it made no sense (to tell the reader)."""

    q: str = ""
    sort: str = "name"
    order: str = "asc"
    filter: str = ""
    problems: tuple[str, ...] = ()

    @property
    def aria_sort(self) -> str:
        return "descending" if self.order == "desc" else "ascending"

    def link(self, **changes: str) -> str:
        """This page's address with some of the parameters changed (the defaults left out)."""
        chosen = replace(self, **changes)
        params = {name: getattr(chosen, name) for name in ("q", "sort", "order", "filter")}
        params = {
            name: value
            for name, value in params.items()
            if value and value != getattr(Listing, name)
        }
        return url_for(request.endpoint, **(request.view_args or {}), **params)

    def sort_link(self, column: str) -> str:
        """The column header's link: by the column, ascending, or the other way round when the
        list is sorted by it already."""
        reverse = self.sort == column and self.order == "asc"
        return self.link(sort=column, order="desc" if reverse else "asc")


def read_listing(args: Mapping[str, str], sorts: Iterable[str], filters: Iterable[str]) -> Listing:
    """The page's Listing; a sort, order or filter it does not know is left at its default and
    named in `problems`."""
    problems = []
    sort, order, chosen = args.get("sort", "name"), args.get("order", "asc"), args.get("filter", "")
    if sort not in sorts:
        problems.append(
            _("The list cannot be sorted by “%(name)s”; it is sorted by name.", name=sort)
        )
        sort = "name"
    if order not in ORDERS:
        problems.append(_("The order is “asc” or “desc”, not “%(name)s”.", name=order))
        order = "asc"
    if chosen and chosen not in filters:
        problems.append(_("There is no filter “%(name)s”; every student is listed.", name=chosen))
        chosen = ""
    return Listing(args.get("q", "").strip(), sort, order, chosen, tuple(problems))


def requested_listing(sorts: Iterable[str], filters: Iterable[str]) -> Listing:
    """This request's Listing, with what its query string gets wrong flashed to the reader."""
    listing = read_listing(request.args, sorts, filters)
    for problem in listing.problems:
        flash(problem, "error")
    return listing


def arrange(
    rows: Iterable[Row],
    listing: Listing,
    student: Callable[[Row], User],
    keys: Mapping[str, Callable[[Row], Any]],
    filters: Mapping[str, Callable[[Row], bool]],
) -> list[Row]:
    """The rows the listing asks for, in its order; rows with nothing to sort by (no score
    yet) come last either way, and ties keep the order the rows came in."""
    wanted = folded(listing.q)
    kept = [
        row
        for row in rows
        if (not wanted or any(wanted in folded(text) for text in _searched(student(row))))
        and (not listing.filter or filters[listing.filter](row))
    ]
    key = keys[listing.sort]
    valued = sorted(
        (row for row in kept if key(row) is not None), key=key, reverse=listing.order == "desc"
    )
    return valued + [row for row in kept if key(row) is None]


def _searched(user: User) -> tuple[str, str, str]:
    return user.username, user.name, user.email


def by_name(user: User) -> tuple[str, str, str, str]:
    """By family name, then given name, as every list of students (server/core/names.py)."""
    return by_family_name(user)


def by_username(user: User) -> str:
    """Every list sorts usernames alike: "Bea" between "ana" and "carl"."""
    return user.username.casefold()
