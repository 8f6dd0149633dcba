"""Grading, on three floors: `worker.harness` at the ground (the harness and its contracts, what
runs in a course venv and on compute nodes), `worker.grading` beside the web (dispatch,
executors, Slurm, Celery tasks) and `worker.cli` on top (the `hpcgrade` command);
`worker.celery_app` is the worker's two-line entry point."""
