"""Languages and times: Flask-Babel with the portal's choice of language, the course's time zone,
and the template filters that show a moment as a reader expects it (never raw ISO)."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from functools import lru_cache
from pathlib import Path
from typing import Callable
from urllib.parse import quote, urlencode

import babel.numbers
from babel import Locale
from flask import Flask, g, request, session
from flask_babel import Babel, format_datetime, format_timedelta, get_locale
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from jinja2 import pass_context

from server.core.config import app_settings

LANGS = ("en", "es")
# the catalogues beside the web, shared with the terminal client (hpcgrade/summary.py)
CATALOGUES = str(Path(__file__).resolve().parents[1] / "translations")
# the states of a submission and of one grading run, as the pages name them
STATES = {
    "queued": _l("queued"),
    "running": _l("running"),
    "graded": _l("graded"),
    "error": _l("grader error"),
    "cancelled": _l("cancelled"),
    "done": _l("done"),
    "failed": _l("failed"),
    "lost": _l("lost"),
    # a regrade's preview runs (worker/grading/preview.py)
    "previewing": _l("being graded"),
    "preview": _l("preview"),
}
# exercise.toml's sections; a section not named here is shown as its exercises spell it
SECTIONS = {"tensors": _l("Tensors"), "autograd": _l("Autograd")}


def request_language() -> str:
    """The request's language: ?lang=, then the session's choice, then the browser's."""
    asked = request.args.get("lang")
    return (
        asked
        if asked in LANGS
        else (session.get("lang") or request.accept_languages.best_match(LANGS) or "en")
    )


def time_zone() -> str:
    """The time zone of the request's course, else the service's (TIMEZONE)."""
    course = g.get("course")
    return course.timezone if course is not None and course.timezone else app_settings().timezone


def init_app(app: Flask) -> None:
    Babel(
        app,
        locale_selector=request_language,
        default_translation_directories=CATALOGUES,
        timezone_selector=time_zone,
    )
    filters = app.jinja_env.filters
    by_language = {name: filters[name] for name in BABEL_FILTERS} | dict(
        when=when,
        due=due,
        state=state,
        section=section,
        points=points,
        out_of=out_of,
    )
    filters.update({name: at_render_time(f) for name, f in by_language.items()})
    app.jinja_env.globals.update(language_url=language_url)


BABEL_FILTERS = (
    "datetimeformat",
    "dateformat",
    "timeformat",
    "timedeltaformat",
    "numberformat",
    "decimalformat",
    "currencyformat",
    "percentformat",
    "scientificformat",
)


def at_render_time(language_filter: Callable) -> Callable:
    """Jinja applies a filter to a constant (`{{ 1|percentformat }}`) once, as it compiles the
    template, in the language of whichever request compiled it; a filter that takes the context
    is applied at each rendering, in the reader's language."""

    @pass_context
    def rendered(context, value, *args, **kwargs):
        return language_filter(value, *args, **kwargs)

    return rendered


def language_url(lang: str) -> str:
    """This page in `lang`: the same path and query (a log-in's next= too), only lang= replaced."""
    query = [(k, v) for k, v in request.args.items(multi=True) if k != "lang"] + [("lang", lang)]
    return f"{request.script_root}{quote(request.path)}?{urlencode(query, safe='/')}"


def state(name: str) -> str:
    """A submission's or a run's state in the reader's language: "graded" / "corregida"."""
    return str(STATES.get(name, name))


def section(name: str) -> str:
    """An exercise's section in the reader's language: "tensors" / "Tensores"."""
    return str(SECTIONS.get(name, name))


def points(value: float | None) -> str:
    """A score or a maximum as the reader writes numbers, to two decimals at most: "8", "7.5" /
    "7,5"; "—" for none."""
    # + 0.0: a rounded -0.001 is -0.0, which would show its sign
    return "—" if value is None else _decimal(round(value, 2) + 0.0, get_locale())


@lru_cache(maxsize=4096)
def _decimal(value: float, locale: Locale | None) -> str:
    """Babel's formatting, remembered: a page of a thousand scores (a regrade's preview, the
    gradebook) shows the same few numbers again and again, at 50 µs or so each time."""
    return babel.numbers.format_decimal(value, "0.##", locale=locale)


def out_of(score: float | None, maximum: float | None) -> str:
    """ "8 / 10"; "8" where the maximum is not known; "—" for no score yet."""
    if score is None:
        return "—"
    return points(score) if maximum is None else f"{points(score)} / {points(maximum)}"


def when(moment: dt.datetime | None) -> str:
    """A moment in the course's time zone, with that zone's name then (a reader may be
    elsewhere): "23 Nov 2026, 18:00 CET" / "23 nov 2026, 18:00 CET"."""
    if moment is None:
        return "—"
    zone = moment.astimezone(zoneinfo.ZoneInfo(time_zone())).tzname()
    return f"{format_datetime(moment, 'd MMM y, HH:mm')} {zone}"


def local_input(moment: dt.datetime | None) -> str:
    """A moment as a date picker (<input type="datetime-local">) holds it, in the course's
    time zone: "2026-11-23T18:00"; "" for none."""
    if moment is None:
        return ""
    return moment.astimezone(zoneinfo.ZoneInfo(time_zone())).strftime("%Y-%m-%dT%H:%M")


def due(deadline: dt.datetime, now: dt.datetime) -> str:
    """How far a deadline is: "due in 3 days", "closed 2 hours ago"."""
    left = deadline - now  # both aware: db.UTCDateTime and models.utcnow
    distance = format_timedelta(left, add_direction=True, threshold=1.0)
    return (
        _("due %(distance)s", distance=distance)
        if left > dt.timedelta(0)
        else _("closed %(distance)s", distance=distance)
    )
