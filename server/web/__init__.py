"""The web: the app factory (`app.create_app`), the student portal, the staff pages and the JSON
API, one blueprint per module, with their templates and static files. It stands on
`server.core` and never imports the grading side: it hands work over through Celery."""
