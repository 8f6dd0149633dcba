"""The pictures on an exercise's staff page: a histogram of best scores and a bar chart of the
diagnostics, as SVG drawn on the server (no script, no inline style, text a screen reader
reads), and the submissions behind a diagnostic."""

import re
import xml.etree.ElementTree as ET

import pytest
from helpers import logged_in

from server.web.charts import diagnostics_chart, histogram, score_bins

# its queries are tested on both databases elsewhere: the pages, on the one a deployment runs
pytestmark = pytest.mark.postgresql_only

SVG = "{http://www.w3.org/2000/svg}"


def parsed(markup: str) -> ET.Element:
    return ET.fromstring(str(markup))


def texts(svg: ET.Element) -> list[str]:
    return [t.text for t in svg.iter(f"{SVG}text")]


def test_a_few_points_get_a_bin_each_and_full_marks_the_last():
    bins = score_bins([10, 10, 3, 3.5, 9.99, 0], 10)
    assert [b.label for b in bins] == [str(n) for n in range(11)]
    assert {b.label: b.count for b in bins if b.count} == {"0": 1, "3": 2, "9": 1, "10": 2}


def test_many_points_get_ten_bins_of_equal_width():
    bins = score_bins([0, 55, 99.9, 100, 120, -3], 100)
    assert len(bins) == 10 and bins[0].label == "0–10" and bins[-1].label == "90–100"
    # a score past either end (an override, say) counts in the bin at that end
    assert [b.count for b in bins] == [2, 0, 0, 0, 0, 1, 0, 0, 0, 3]
    assert [b.label for b in score_bins([1], 7.5)][:2] == ["0–0.75", "0.75–1.5"]


def test_the_histogram_is_an_image_that_says_what_it_shows(app):
    with app.test_request_context("/"):
        svg = parsed(histogram([10, 10, 3], 10, "scores"))
    assert svg.get("role") == "img" and svg.get("viewBox") == "0 0 360 200"
    assert svg.get("width") == "100%" and svg.get("class") == "chart"
    assert svg.get("aria-labelledby") == "scores-title"
    assert svg.get("aria-describedby") == "scores-desc"
    assert svg.find(f"{SVG}title").get("id") == "scores-title"
    assert svg.find(f"{SVG}title").text == "Best scores"
    assert (
        svg.find(f"{SVG}desc").text
        == "The best scores of 3 students: 1 student with 3; 2 students with 10."
    )
    axis = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "axis"]
    assert axis == [str(n) for n in range(11)] + ["Best score (out of 10)"]
    counts = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") is None]
    assert counts == ["1", "2"]  # above the bars of 3 and 10
    bars = svg.findall(f"{SVG}rect")
    assert len(bars) == 11 and [b.get("class") for b in bars][-1] == "bar full"
    heights = [float(b.get("height")) for b in bars]
    assert heights[10] == 2 * heights[3] and heights[0] == 0


def test_the_histogram_in_spanish(app):
    with app.test_request_context("/?lang=es"):
        svg = parsed(histogram([75], 100, "scores"))
    assert svg.find(f"{SVG}title").text == "Mejores notas"
    assert svg.find(f"{SVG}desc").text == "La mejor nota de 1 estudiante: 1 estudiante de 70 a 80."
    assert "Mejor nota (sobre 100)" in texts(svg)
    assert "100" in texts(svg)  # the bins' bounds under their edges


def test_each_diagnostic_bar_links_to_its_submissions(app):
    with app.test_request_context("/"):
        svg = parsed(
            diagnostics_chart(
                [("grad-sign-flipped", 4), ("<b>", 1)], lambda code: f"/d/{code}?x=1&y=2", "codes"
            )
        )
    assert svg.get("role") == "group"  # its links stay reachable, as an image's parts are not
    assert svg.find(f"{SVG}title").text == "Diagnostics by number of students"
    assert (
        svg.find(f"{SVG}desc").text
        == "Students who got each diagnostic: grad-sign-flipped: 4 students; <b>: 1 student."
    )
    links = svg.findall(f"{SVG}a")
    assert [a.get("href") for a in links] == ["/d/grad-sign-flipped?x=1&y=2", "/d/<b>?x=1&y=2"]
    assert [a.get("aria-label") for a in links] == [
        "grad-sign-flipped: 4 students",
        "<b>: 1 student",
    ]
    widths = [float(a.find(f"{SVG}rect").get("width")) for a in links]
    assert widths[0] == pytest.approx(4 * widths[1])
    assert texts(svg) == ["grad-sign-flipped", "4", "<b>", "1"]


def test_the_exercise_page_draws_both_charts_inline(marked_course):
    app, _ = marked_course
    client, _ = logged_in(app, "prof")
    page = client.get("/courses/pytorch/staff/exercises/autograd-q").text
    charts = re.findall(r"<svg .*?</svg>", page, re.S)
    assert len(charts) == 2
    scores, codes = map(parsed, charts)
    # ana's best is 10, bea's is her override, 6; the instructor's own submission is left out
    assert (
        scores.find(f"{SVG}desc").text
        == "The best scores of 2 students: 1 student with 6; 1 student with 10."
    )
    assert [a.get("href") for a in codes.findall(f"{SVG}a")] == [
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped",
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/missing-function",
    ]
    # what the CSP allows: no script, no style attribute or element
    assert "<script" not in page and "style=" not in page and "<style" not in page
    empty = client.get("/courses/pytorch/staff/exercises/tensors-reshape").text
    assert "<svg" not in empty and "No student has a graded submission yet." in empty


def test_a_diagnostic_lists_the_submissions_behind_it(marked_course):
    app, ids = marked_course
    client, _ = logged_in(app, "prof")
    page = client.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped"
    ).text
    rows = re.findall(r"<tr><td>.*?</tr>", page, re.S)
    assert len(rows) == 2  # ana's first submission and bea's; not the instructor's
    assert "Ana García" in rows[0] and f'/courses/pytorch/submissions/{ids["ana-q-1"]}"' in rows[0]
    assert "4 / 10" in rows[0] and "23 Nov 2026, 17:00" in rows[0]
    assert "Bea" in rows[1] and "6 / 10" in rows[1]  # the override
    assert "<code>grad-sign-flipped</code> in English" in rows[1]  # its inline Markdown
    assert "2 submissions got this diagnostic" in page
    spanish = client.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/missing-function?lang=es"
    ).text
    assert "<code>missing-function</code> en español" in spanish
    assert "1 entrega recibió este diagnóstico" in spanish
    nobody = client.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/timeout?lang=en"
    ).text
    assert "No student's submission of this exercise has this diagnostic." in nobody
    assert (
        client.get("/courses/pytorch/staff/exercises/nothing/diagnostics/timeout").status_code
        == 404
    )


def test_a_mistake_said_once_is_listed_once(marked_course):
    """A later check's "the same mistake as in …" is not listed beside the first check's words."""
    from server.core.models import CheckResult, DiagnosticResult, GradingRun

    app, ids = marked_course
    with app.extensions["hpcgrade.db"].sessions.begin() as session:
        run = session.query(GradingRun).filter_by(submission_id=ids["ana-q-1"]).one()
        run.checks.append(
            CheckResult(
                position=1,
                name="later",
                title="later",
                points=0,
                max_points=0,
                passed=False,
                diagnostics=[
                    DiagnosticResult(
                        code="grad-sign-flipped",
                        message="same as all",
                        hint="",
                        details={"same_as": "all"},
                        translations={},
                    )
                ],
            )
        )
    client, _ = logged_in(app, "prof")
    page = client.get(
        "/courses/pytorch/staff/exercises/autograd-q/diagnostics/grad-sign-flipped"
    ).text
    assert "same as all" not in page and "<code>grad-sign-flipped</code> in English" in page
