"""Worker entry point: `celery -A worker.celery_app worker`. The schedule runs apart, exactly once
for the whole service: `celery -A worker.celery_app beat` (not `worker -B`: a killed worker would
leave its embedded scheduler running as an orphan, beside the next one). A worker beats through
the broker (worker/grading/heartbeat.py). It imports the tasks (the core sends them by name) and
refuses to start when one the service sends is not registered."""

import logging

from celery.signals import after_setup_logger

import worker.grading.tasks  # noqa: F401 - registers the tasks
from server.core.config import app_settings
from server.core.task_names import check_registered
from server.web.app import create_app
from worker.grading.heartbeat import heartbeat_step

flask_app = create_app()  # not `app`: Celery's -A takes a module's `app` before its `celery`
celery = flask_app.extensions["celery"]
celery.steps["consumer"].add(heartbeat_step(app_settings(flask_app)))
check_registered(celery.tasks)

# a line for each task received and each task done, and for each task beat sends, at INFO:
# collect's, every second, were two thousand lines in a quiet quarter of an hour. What fails is
# still logged (at ERROR), and so is what the service's own modules say
ROUTINE_LOGGERS = ("celery.app.trace", "celery.worker.strategy", "celery.beat")


@after_setup_logger.connect
def quiet_routine_lines(**_kwargs) -> None:
    for name in ROUTINE_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
