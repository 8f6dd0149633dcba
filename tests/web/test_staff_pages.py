"""Every staff page, whichever module adds it, is refused to a student: the check is written
once (server/web/staff_pages.py) and no longer hangs on the order the app registers its
blueprints in (app.py runs the user's, the language's and the course's hooks in order)."""

import re

from helpers import logged_in

from server.web.staff_pages import PREFIX


def test_a_student_gets_403_on_every_staff_page_and_action(course):
    student, token = logged_in(course, "ana")
    rules = [rule for rule in course.url_map.iter_rules() if rule.rule.startswith(PREFIX)]
    assert {rule.endpoint.split(".")[0] for rule in rules} >= {
        "staff",
        "roster",
        "allowances",
        "accommodations",
        "handgrading",
        "regrade",
    }
    for rule in rules:
        path = re.sub(
            r"<(?:\w+:)?(\w+)>", lambda m: "pytorch" if m[1] == "course" else "1", rule.rule
        )
        for method in sorted(rule.methods & {"GET", "POST"}):
            answer = student.open(path, method=method, data={"csrf_token": token})
            assert answer.status_code == 403, (method, path, answer.status_code)


def test_the_hooks_every_request_needs_run_in_their_order(course):
    hooks = [hook.__name__ for hook in course.before_request_funcs[None]]
    assert hooks[-3:] == ["load_user", "choose_language", "load_course"]
