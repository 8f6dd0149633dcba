"""The hpcgrade service, on two floors: `server.core` (typed settings, models, the exercise
catalogue, queue order, grade rules), which the grading side shares, and above it `server.web`
(the portal, the staff pages and the JSON API, wired by `server.web.app.create_app`)."""
