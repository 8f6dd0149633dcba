"""The CSV files made for a spreadsheet (server/web/spreadsheet.py): text never runs as a formula,
numbers as the reader's Excel reads them."""

import csv
import io

from server.web.spreadsheet import PLAIN, cell, csv_text, for_excel


def test_text_that_would_run_as_a_formula_gets_a_leading_quote():
    for hostile in ("=1+1", "+1", "-2+3", "@SUM(A1)", "\tTab", "\rReturn"):
        assert cell(hostile) == "'" + hostile
    assert cell("Ana García") == "Ana García" and cell("a-b@uni.es") == "a-b@uni.es"


def test_numbers_and_separators_by_dialect():
    assert [PLAIN.number(v) for v in (None, 7, 7.5, 2 / 3)] == ["", "7", "7.5", "0.67"]
    assert PLAIN.number(75, places=1) == "75.0"
    spanish, english = for_excel("es"), for_excel("en")
    assert spanish.number(7.5) == "7,5" and english.number(7.5) == "7.5"
    sheet = csv_text([["name", "score"], [cell("Núñez, Carl"), spanish.number(7.5)]], spanish)
    assert sheet == "\ufeffname;score\r\nNúñez, Carl;7,5\r\n"
    assert list(csv.reader(io.StringIO(csv_text([["a,b", "1"]])))) == [["a,b", "1"]]
    assert csv_text([["x"]], english) == "\ufeffx\r\n"
