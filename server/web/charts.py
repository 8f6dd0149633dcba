"""The pictures on an exercise's staff page, drawn on the server as SVG: a histogram of the
students' best scores and a bar chart of the diagnostics they got.

Plain markup inlined in the page: no script, nothing fetched, colours from the site's stylesheet
(classes, since the CSP allows no inline style). Each picture has a <title> and a <desc> that
says in words what it shows, and labels in text; the viewBox lets it shrink to a phone's width."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flask_babel import gettext as _
from flask_babel import ngettext
from markupsafe import Markup, escape

from server.web.i18n import points

WIDTH = 360  # viewBox units: at a phone's 390 px the 12-unit text stays about 11 px high
PER_POINT_UP_TO = 12  # an exercise out of at most this many points gets one bar per point
RANGE_BINS = 10


@dataclass(frozen=True)
class Bin:
    low: float
    high: float  # excluded, except for the last bin, which holds full marks
    label: str
    count: int


def _per_point(out_of: float) -> bool:
    return out_of == int(out_of) and out_of <= PER_POINT_UP_TO


def score_bins(scores: Sequence[float], out_of: float) -> list[Bin]:
    """Best scores counted in bins over 0..out_of: one per point (a bin "7" holds 7 up to, not
    including, 8; the last one full marks) when the exercise has few points, else ten of equal
    width."""
    per_point = _per_point(out_of)
    count = int(out_of) + 1 if per_point else RANGE_BINS
    width = 1.0 if per_point else out_of / RANGE_BINS
    tally = [0] * count
    for score in scores:
        tally[min(max(math.floor(score / width), 0), count - 1)] += 1
    return [
        Bin(
            i * width,
            min((i + 1) * width, out_of),
            points(i * width)
            if per_point
            else f"{points(i * width)}–{points(min((i + 1) * width, out_of))}",
            n,
        )
        for i, n in enumerate(tally)
    ]


def histogram(scores: Sequence[float], out_of: float, chart_id: str) -> Markup:
    """How many students have each best score; the full-marks bar stands out."""
    bins = score_bins(scores, out_of)
    top, bottom, left = 18, 44, 6
    height = 200
    plot_height = height - top - bottom
    step = (WIDTH - 2 * left) / len(bins)
    tallest = max(b.count for b in bins) or 1
    per_point = _per_point(out_of)
    parts = []
    for i, b in enumerate(bins):
        x = left + i * step
        bar = plot_height * b.count / tallest
        full = per_point and b.low == out_of
        parts.append(
            f'<rect class="bar{" full" if full else ""}" x="{x + 1:.1f}" '
            f'y="{top + plot_height - bar:.1f}" width="{step - 2:.1f}" '
            f'height="{bar:.1f}"/>'
        )
        if b.count:
            parts.append(_text(x + step / 2, top + plot_height - bar - 4, str(b.count), "middle"))
        if per_point:
            parts.append(_text(x + step / 2, top + plot_height + 14, b.label, "middle", "axis"))
    if not per_point:  # ranges: the bounds under the bars' edges
        for i in range(len(bins) + 1):
            edge = bins[0].low if i == 0 else bins[i - 1].high
            parts.append(
                _text(left + i * step, top + plot_height + 14, points(edge), "middle", "axis")
            )
    parts.append(
        f'<line class="baseline" x1="{left}" x2="{WIDTH - left}" '
        f'y1="{top + plot_height}" y2="{top + plot_height}"/>'
    )
    parts.append(
        _text(
            WIDTH / 2,
            height - 6,
            _("Best score (out of %(points)s)", points=points(out_of)),
            "middle",
            "axis",
        )
    )
    described = "; ".join(_bin_words(b, per_point) for b in bins if b.count)
    return _svg(
        chart_id,
        height,
        "img",
        _("Best scores"),
        ngettext(
            "The best score of %(num)s student: %(bins)s.",
            "The best scores of %(num)s students: %(bins)s.",
            len(scores),
            bins=described,
        ),
        parts,
    )


def _bin_words(b: Bin, per_point: bool) -> str:
    students = ngettext("%(num)s student", "%(num)s students", b.count)
    if per_point:
        return _("%(students)s with %(score)s", students=students, score=b.label)
    return _(
        "%(students)s from %(low)s to %(high)s",
        students=students,
        low=points(b.low),
        high=points(b.high),
    )


def diagnostics_chart(
    counts: Sequence[tuple[str, int]], link: Callable[[str], str], chart_id: str
) -> Markup:
    """One bar per diagnostic code, as long as the number of students who got it; each bar is
    a link to the submissions behind it."""
    row_height, bar_height, margin = 38, 14, 6
    height = row_height * len(counts) + margin
    longest = max((n for _, n in counts), default=0) or 1
    room = WIDTH - 2 * margin - 36  # space for the number after the longest bar
    parts = []
    for i, (code, students) in enumerate(counts):
        y = margin + i * row_height
        bar = max(room * students / longest, 2)
        label = ngettext(
            "%(code)s: %(num)s student", "%(code)s: %(num)s students", students, code=code
        )
        # the whole row takes the click or the tap (the last rect, transparent, over the others),
        # not only the thin bar and the text, with a gap between them
        parts.append(
            f'<a href="{escape(link(code))}" aria-label="{escape(label)}">'
            f"{_text(margin, y + 12, code, 'start', 'code')}"
            f'<rect class="bar" x="{margin}" y="{y + 17}" width="{bar:.1f}" '
            f'height="{bar_height}"/>'
            f"{_text(margin + bar + 6, y + 28, str(students), 'start')}"
            f'<rect class="hit" x="0" y="{y}" width="{WIDTH}" height="{row_height}"/></a>'
        )
    described = "; ".join(
        ngettext("%(code)s: %(num)s student", "%(code)s: %(num)s students", n, code=code)
        for code, n in counts
    )
    # a group, not an image: an image's parts are hidden from screen readers, and the bars
    # are links they must reach
    return _svg(
        chart_id,
        height,
        "group",
        _("Diagnostics by number of students"),
        _("Students who got each diagnostic: %(codes)s.", codes=described),
        parts,
    )


def _text(x: float, y: float, text: str, anchor: str, css_class: str = "") -> str:
    classes = f' class="{css_class}"' if css_class else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{classes}>{escape(text)}</text>'


def _svg(
    chart_id: str, height: int, role: str, title: str, description: str, parts: list[str]
) -> Markup:
    return Markup(
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
        f'width="100%" role="{role}" aria-labelledby="{chart_id}-title" '
        f'aria-describedby="{chart_id}-desc">'
        f'<title id="{chart_id}-title">{escape(title)}</title>'
        f'<desc id="{chart_id}-desc">{escape(description)}</desc>{"".join(parts)}</svg>'
    )
