"""A long list shown a page at a time, from the query string's ?page= (1 unless told): the
gradebook of a 200-student course is four pages of 50 rows, not one 20,000-pixel table. The
other parameters (search, sort, filter) are kept in the pages' links, so that paging never loses
them; a new search or sort starts again at the first page (listing.Listing's links leave
?page= out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from flask import request, url_for

Row = TypeVar("Row")
PAGE_SIZE = 50


@dataclass(frozen=True)
class Page(Generic[Row]):
    rows: Sequence[Row]  # this page's
    number: int  # from 1
    count: int  # of pages, at least 1
    first: int  # the position of this page's first row in the whole list, from 1

    @property
    def last(self) -> int:
        return self.first + len(self.rows) - 1

    def link(self, number: int) -> str:
        """This address at page `number`, every other parameter kept."""
        args = {name: value for name, value in request.args.items() if name != "page"}
        if number > 1:
            args["page"] = str(number)
        return url_for(request.endpoint, **(request.view_args or {}), **args)


def requested_page(rows: Sequence[Row], size: int = PAGE_SIZE) -> Page[Row]:
    """The page of `rows` that ?page= asks for; a number that is not one, or is past the end,
    gives the nearest page there is."""
    count = max(1, -(-len(rows) // size))
    try:
        number = int(request.args.get("page", "1"))
    except ValueError:
        number = 1
    number = min(max(number, 1), count)
    start = (number - 1) * size
    return Page(rows[start : start + size], number, count, start + 1)
