"""The Celery tasks' names, declared once: the core and the web send tasks by these names (they
never import the grading side), worker/grading/tasks.py registers a task under each, and the
worker's entry point (worker/celery_app.py) refuses to start when one is not registered."""

DISPATCH = "hpcgrade.dispatch"
COLLECT = "hpcgrade.collect"
CANCEL = "hpcgrade.cancel"
PREVIEW = "hpcgrade.preview"
MAIL_LINKS = "hpcgrade.mail_links"
NOTIFY = "hpcgrade.notify"
REMIND_DEADLINES = "hpcgrade.remind_deadlines"
REPORT_FAILURES = "hpcgrade.report_failures"
RECONCILE = "hpcgrade.reconcile"
PRUNE_SPOOL = "hpcgrade.prune_spool"
USERS_SYNC = "hpcgrade.users_sync"
VISIBLE_CHECK = "hpcgrade.visible_check"
SIMILARITY = "hpcgrade.similarity"

TASK_NAMES = frozenset(
    {
        DISPATCH,
        COLLECT,
        CANCEL,
        PREVIEW,
        MAIL_LINKS,
        NOTIFY,
        REMIND_DEADLINES,
        REPORT_FAILURES,
        RECONCILE,
        PRUNE_SPOOL,
        USERS_SYNC,
        VISIBLE_CHECK,
        SIMILARITY,
    }
)


class TasksMissing(RuntimeError):
    """A task the service sends that no module registered: its messages would wait forever."""


def check_registered(registered) -> None:
    """Raise TasksMissing unless every declared name is among `registered` (a Celery app's
    `tasks`)."""
    missing = sorted(TASK_NAMES - set(registered))
    if missing:
        raise TasksMissing(f"no task registered under {', '.join(missing)}")
