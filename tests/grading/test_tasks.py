"""The Celery tasks as a worker binds them: every one ends, by a soft time limit from its
purpose and a hard one after it."""

import pytest

from server.core.task_names import TASK_NAMES, TasksMissing, check_registered
from server.web.app import create_app


def bound_tasks(app) -> dict:
    import worker.grading.tasks  # noqa: F401 - what the worker's entry point imports

    celery = app.extensions["celery"]
    return {name: task for name, task in celery.tasks.items() if name.startswith("hpcgrade.")}


def test_the_tasks_registered_are_the_names_declared(app):
    """Every name the service sends a task by is registered, and no task goes unnamed there; the
    worker checks the first at its start."""
    assert set(bound_tasks(app)) == TASK_NAMES
    check_registered(app.extensions["celery"].tasks)
    with pytest.raises(TasksMissing, match="no task registered under hpcgrade.collect"):
        check_registered(TASK_NAMES - {"hpcgrade.collect"})


def test_every_task_has_a_soft_time_limit_and_a_hard_one_after_it(app):
    tasks = bound_tasks(app)
    assert {
        "hpcgrade.dispatch",
        "hpcgrade.collect",
        "hpcgrade.preview",
        "hpcgrade.notify",
        "hpcgrade.reconcile",
    } <= set(tasks)
    for name, task in tasks.items():
        assert task.soft_time_limit and task.time_limit > task.soft_time_limit, name


def test_a_dispatch_ends_within_its_runs_lease(tmp_path):
    app = create_app(
        {
            "DATABASE_URL": f"sqlite:///{tmp_path / 'h.sqlite'}",
            "SECRET_KEY": "x",
            "SPOOL_DIR": str(tmp_path),
            "GRADING_LEASE_SECONDS": 240,
        }
    )
    assert bound_tasks(app)["hpcgrade.dispatch"].soft_time_limit == 240


@pytest.mark.services
def test_redis_gives_no_task_to_a_second_worker_while_the_first_may_still_run_it(tmp_path):
    """kombu's Redis transport hands a message unacknowledged for its visibility time-out (an
    hour unless told) to another worker; a task acknowledges its message at its end, and a
    regrade's preview may run six hours: it ran twice, then thrice. The time-out the worker's
    channel keeps outlasts every task's hard limit, and a deployment's own option still wins."""
    settings = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'h.sqlite'}",
        "SECRET_KEY": "x",
        "BROKER_URL": "redis://127.0.0.1:6379/15",
    }
    app = create_app(settings)
    longest = max(task.time_limit for task in bound_tasks(app).values())
    with app.extensions["celery"].connection_for_read() as connection:
        assert connection.default_channel.visibility_timeout > longest >= 6 * 3600
    told = create_app({**settings, "BROKER_TRANSPORT_OPTIONS": {"visibility_timeout": 86400}})
    with told.extensions["celery"].connection_for_read() as connection:
        assert connection.default_channel.visibility_timeout == 86400
