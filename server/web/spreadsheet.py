"""Spreadsheets for download, as CSV: text that a spreadsheet shows and never runs as a formula,
numbers written as the reader's spreadsheet reads them, and the variant that Excel opens right.

Excel opens a CSV (a double click) with the list separator and the decimal mark of the
computer's region, and in the computer's legacy encoding unless the file starts with a byte order
mark: "García" turns into "GarcÃ­a". Its variant is UTF-8 with a BOM, and for a Spanish reader
`;` between the cells and a decimal comma (with `,` a Spanish Excel puts each line in one cell,
and reads 7.5 as a date). A first line `sep=;` would choose the separator whatever the region,
but Excel then ignores the BOM and the accents break again."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from flask import Response, g

# a cell that starts with one of these is a formula to a spreadsheet (OWASP's CSV injection)
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
BOM = "\ufeff"


@dataclass(frozen=True)
class Dialect:
    delimiter: str = ","
    decimal: str = "."
    bom: bool = False

    def number(self, value: float | None, places: int | None = None) -> str:
        """A number as this dialect writes it: `places` decimals, or up to two without trailing
        zeros; "" for none."""
        if value is None:
            return ""
        text = f"{value:.{places}f}" if places is not None else f"{round(value, 2):g}"
        return text.replace(".", self.decimal)


PLAIN = Dialect()  # for programs and the university's records: commas, decimal points, no BOM


def for_excel(lang: str) -> Dialect:
    return Dialect(";", ",", bom=True) if lang == "es" else Dialect(",", ".", bom=True)


def cell(text: str) -> str:
    """Text a spreadsheet shows as text, never runs as a formula: one that starts with = + - @,
    a tab or a carriage return gets a leading quote (OWASP's CSV injection advice)."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def csv_text(rows: Iterable[Sequence[str]], dialect: Dialect = PLAIN) -> str:
    """The rows as CSV; their text already through cell(), their numbers through the dialect."""
    out = io.StringIO()
    writer = csv.writer(out, delimiter=dialect.delimiter)
    writer.writerows(rows)
    return (BOM if dialect.bom else "") + out.getvalue()


def course_file(kind: str) -> str:
    """A download's name, by course and kind ("pytorch-2026-grades.csv"): files of two courses,
    or two kinds, saved to one folder keep apart."""
    return f"{g.course.slug}-{kind}.csv"


def csv_response(
    rows: Iterable[Sequence[str]], filename: str, dialect: Dialect = PLAIN
) -> Response:
    return Response(
        csv_text(rows, dialect),
        mimetype="text/csv",  # UTF-8, named by Flask
        headers={"Content-Disposition": f"attachment; filename={filename}"},
    )
