"""Known wrong programs, recognised by the visible checks on a student's own machine.

The second look names a known wrong program by running the hidden checks again with it: that
needs its code, which never leaves the grader. The visible checks have fixed inputs, so a known
wrong program's failures of them are fixed too: `hpcgrade exercise check` writes them, with the
program's words and nothing of its code, to the exercise's visible_mistakes.json, which `check`
fetches with the visible checks. A student's run whose failed checks say exactly what one
program's said is told that program's words, as the grade would tell them.
"""

from __future__ import annotations

from worker.harness.source_rules import said_of

FILE = "visible_mistakes.json"


def marks(report: dict) -> dict[str, str]:
    """What each failed check of a report (as JSON) said first, in English: the values, shapes
    or errors the fixed inputs brought about."""
    found = {}
    for check in report.get("checks", []):
        if check.get("passed"):
            continue
        first = (check.get("diagnostics") or [{}])[0]
        found[check["name"]] = (
            first.get("translations", {}).get("en", {}).get("message", check.get("message", ""))
        )
    return found


def recognised(report: dict, mistakes: dict, lang: str, cells: tuple[tuple[str, str], ...]) -> dict:
    """The report with the first failed check's first diagnostic telling the known wrong
    program whose marks are the report's, in `lang` (its words as the file's `cells` show them:
    source_rules.said_of); the report itself when none fits."""
    found = marks(report)
    name = next((n for n, known in mistakes.items() if found and known.get("marks") == found), None)
    if name is None:
        return report
    says = said_of(mistakes[name], cells)
    checks = list(report["checks"])
    at = next((i for i, c in enumerate(checks) if not c["passed"] and c.get("diagnostics")), None)
    if at is None:
        return report
    first, *rest = checks[at]["diagnostics"]
    translations = {
        other: dict(text, hint=says.get(other, says["en"]))
        for other, text in first.get("translations", {}).items()
    }
    named = dict(
        first,
        hint=says.get(lang, says["en"]),
        translations=translations,
        details=dict(first.get("details", {}), wrong_program=name),
    )
    checks[at] = dict(checks[at], diagnostics=[named, *rest])
    return dict(report, checks=checks)
