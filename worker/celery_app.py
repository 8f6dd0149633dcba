"""Worker entry point: `celery -A worker.celery_app worker`. The schedule runs apart, exactly once
for the whole service: `celery -A worker.celery_app beat` (not `worker -B`: a killed worker would
leave its embedded scheduler running as an orphan, beside the next one)."""
from server.web.app import create_app

celery = create_app().extensions["celery"]
