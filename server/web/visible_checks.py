"""Check, beside Submit on an exercise's page: the exercise's visible checks run on the code in
the sandbox, as `hpcgrade check` runs them, using no attempt and making no grade. Refused as a
submission is (the same file rules), and at most CHECKS_PER_WINDOW in SUBMISSION_WINDOW_MINUTES;
run by the worker once graded work has had its turn (worker/grading/visible_checks.py), shown on
a page of its own to its student alone."""

from __future__ import annotations

import datetime as dt
import json

from flask import (
    Blueprint,
    abort,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_babel import lazy_gettext as _l
from sqlalchemy import func, select

from server.core import task_names
from server.core.config import app_settings
from server.core.models import Exercise, VisibleCheck, VisibleCheckStatus, aware, utcnow
from server.web.auth import db, kept_page, login_required
from server.web.portal import active_exercise
from server.web.results import page_view
from server.web.submissions import Refusal, Rules, check_file, form_work

blueprint = Blueprint("visible_checks", __name__, url_prefix="/courses/<course>")
# a check whose task never reached the worker (a broker away) is sent again by its page, and so
# is one whose worker died running it (worker/grading/visible_checks.py takes it again)
SEND_AGAIN_AFTER = dt.timedelta(seconds=60)
RUN_AGAIN_AFTER = dt.timedelta(minutes=7)
WAITING = (VisibleCheckStatus.queued.value, VisibleCheckStatus.running.value)


@blueprint.app_context_processor
def offered() -> dict:
    """Whether an exercise's page offers Check (CHECKS_PER_WINDOW 0 takes it away)."""
    return {"checks_offered": app_settings().checks_per_window > 0}


@blueprint.post("/exercises/<slug>/check")
@login_required
def ask(slug: str):
    exercise = active_exercise(slug)
    settings = app_settings()
    rules = Rules.from_settings(settings)
    try:
        filename, data = form_work(request.files.get("file"), request.form.get("code", ""), rules)
        check = _accepted(exercise, filename, data, rules, settings.checks_per_window)
    except Refusal as refusal:  # as a submission's: the page's script puts the code back
        flash(refusal.message, "error")
        return redirect(kept_page(url_for("portal.exercise", slug=slug)), 303)
    db().add(check)
    db().commit()
    _send(check)
    return redirect(url_for("visible_checks.shown", check_id=check.id), 303)


def _accepted(
    exercise: Exercise, filename: str, data: bytes, rules: Rules, per_window: int
) -> VisibleCheck:
    if exercise.course.archived_at is not None or per_window == 0:
        raise Refusal(403, _l("Checks are not offered here."))
    check_file(filename, data, rules)
    since = utcnow() - dt.timedelta(minutes=rules.window_minutes)
    asked = db().scalar(
        select(func.count())
        .select_from(VisibleCheck)
        .where(
            VisibleCheck.user_id == g.user.id,
            VisibleCheck.exercise_id == exercise.id,
            VisibleCheck.requested_at > since,
        )
    )
    if asked >= per_window:
        raise Refusal(
            429,
            _l(
                "At most %(num)s checks every %(minutes)s minutes; try again later.",
                num=per_window,
                minutes=rules.window_minutes,
            ),
        )
    return VisibleCheck(
        user_id=g.user.id,
        exercise=exercise,
        filename=filename[-255:],
        code=data,
        lang=g.lang,
        requested_at=utcnow(),
    )


def _send(check: VisibleCheck) -> None:
    """The task sent after the commit; a broker that is away only delays it (the page sends it
    again)."""
    try:
        current_app.extensions["celery"].send_task(
            task_names.VISIBLE_CHECK, args=[check.id], retry=False
        )
    except Exception as exc:  # kombu raises many types for a broker that is away
        current_app.logger.warning("check %s waits: broker unavailable (%s)", check.id, exc)


@blueprint.get("/checks/<int:check_id>")
@login_required
def shown(check_id: int):
    check = db().get(VisibleCheck, check_id)
    if check is None or check.user_id != g.user.id or check.exercise.course_id != g.course.id:
        abort(404)  # another student's check does not exist for you
    waiting = check.status in WAITING
    if _lost(check):
        _send(check)
    report = json.loads(check.report) if check.report else None
    view = (
        page_view(check, _in_language(report, g.lang))
        if check.status == VisibleCheckStatus.done.value
        else None
    )
    return (
        render_template(
            "portal/visible_check.html",
            check=check,
            report=report,
            view=view,
            waiting=waiting,
            title=check.exercise.title_es if g.lang == "es" else check.exercise.title_en,
        ),
        200,
        {"Cache-Control": "no-store"},
    )


def _lost(check: VisibleCheck) -> bool:
    """Whether the check's task seems lost: never taken, or its worker gone."""
    if check.status == VisibleCheckStatus.queued.value:
        return utcnow() - aware(check.requested_at) > SEND_AGAIN_AFTER
    return (
        check.status == VisibleCheckStatus.running.value
        and utcnow() - aware(check.started_at) > RUN_AGAIN_AFTER
    )


def _in_language(report: dict, lang: str) -> dict:
    """The report in the page's language, where the harness gave its words in both."""
    return dict(
        report,
        checks=[
            dict(
                c,
                title=c.get("titles", {}).get(lang, c["title"]),
                diagnostics=[
                    dict(d, **d.get("translations", {}).get(lang, {})) for d in c["diagnostics"]
                ],
            )
            for c in report["checks"]
        ],
        notes=[dict(n, **n.get("translations", {}).get(lang, {})) for n in report["notes"]],
    )
