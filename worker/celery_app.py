"""Worker entry point: `celery -A worker.celery_app worker` (add `-B` for the reconcile schedule)."""
from server import create_app

celery = create_app().extensions["celery"]
