"""The grading side: Celery tasks that dispatch queued submissions to an executor (local
harnesses or Slurm jobs and pilots), collect the reports and settle runs into grades. It stands
on `server.core` and the harness, never on `server.web`."""
