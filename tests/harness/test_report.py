"""The report, one shape wherever a run's result goes: to_dict and from_dict, errors included."""

import json
from dataclasses import replace

import pytest

from worker.harness.report import MAX_REPORT_BYTES, CheckOutcome, Report, ReportStatus

CHECK = {
    "name": "grads",
    "title": "Gradients",
    "points": 2.0,
    "max_points": 3.0,
    "passed": False,
    "message": "one is off",
    "diagnostics": [
        {
            "code": "grad-sign-flipped",
            "message": "m",
            "hint": "h",
            "details": {},
            "translations": {},
        }
    ],
    "titles": {"en": "Gradients", "es": "Gradientes"},
}
GRADED = {
    "exercise": "autograd-q",
    "status": "graded",
    "score": 2.0,
    "max_score": 3.0,
    "checks": [CHECK],
    "notes": [{"kind": "cell-error", "message": "x"}],
    "output": "hi",
    "environment": {"node": "n1"},
    "sandbox": {"layers": ["seccomp"]},
    "timing": {"total": 1.5},
    "seed": 7,
    "lang": "es",
    "job_id": "12",
    "error": None,
    "exercise_version": "5e7a" * 16,
}


def test_a_report_goes_through_json_and_back_unchanged():
    report = Report.from_dict(GRADED)
    assert report.graded and report.checks[0] == CheckOutcome.from_dict(CHECK)
    assert json.loads(json.dumps(report.to_dict())) == GRADED
    assert Report.from_dict(json.loads(json.dumps(report.to_dict()))) == report


def test_a_report_nothing_was_cut_from_does_not_say_cut():
    # every report said "cut": true, its tuples compared with the lists they became
    assert "cut" not in Report.from_dict(GRADED).to_dict()
    cut = replace(Report.from_dict(GRADED), output="x" * (MAX_REPORT_BYTES * 2))
    assert cut.to_dict()["cut"] is True and Report.from_dict(cut.to_dict()).cut


def test_the_graders_error_says_so_and_why():
    error = Report.grader_error("the harness process is gone", "autograd-q", "12")
    assert not error.graded and error.status == ReportStatus.ERROR
    data = json.loads(json.dumps(error.to_dict()))
    assert (data["status"], data["error"], data["job_id"]) == (
        "error",
        "the harness process is gone",
        "12",
    )
    assert Report.from_dict(data) == error


@pytest.mark.parametrize(
    "data, why",
    [
        ([1, 2], "not an object"),
        ({"status": "fine"}, "ReportStatus"),
        ({"status": "graded", "score": 1.0}, "without max_score, checks"),
        (dict(GRADED, checks=[{"name": "c"}]), "a check without"),
        (dict(GRADED, notes=[{"message": "x" * MAX_REPORT_BYTES}]), "the service stores"),
    ],
)
def test_what_is_not_a_report_is_the_graders_error(data, why):
    with pytest.raises(ValueError):
        Report.from_dict(data)
    parsed = Report.parse(data, "report.json")
    assert not parsed.graded and parsed.error.startswith("report.json: ") and why in parsed.error
