"""Celery's own line for each task received and done, and for each task beat sends, stays out
of the journal at INFO (collect runs every second); what fails is logged at ERROR, above it."""

import logging
import os
import subprocess
import sys


def test_routine_task_lines_are_quiet_and_failures_are_not():
    levels = subprocess.run(
        [
            sys.executable,
            "-c",
            "import logging; from celery.signals import after_setup_logger; "
            "import worker.celery_app as c; "
            "after_setup_logger.send(sender=None, logger=logging.getLogger(), loglevel=20, "
            "logfile=None, format='', colorize=False); "
            "print(*[logging.getLogger(n).getEffectiveLevel() for n in c.ROUTINE_LOGGERS])",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=dict(os.environ, HPCGRADE_SECRET_KEY="test", HPCGRADE_DATABASE_URL="sqlite://"),
    ).stdout.splitlines()
    assert set(levels[0].split()) == {str(logging.WARNING)}
