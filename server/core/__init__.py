"""The core of the service, shared by the web and the grading side: typed settings, the
database and its models, the exercise catalogue, the queue's order and Celery, the grade rules,
accounts, API tokens, set-password links and mail. It imports nothing of `server.web` or
`worker` but the harness's contracts."""
