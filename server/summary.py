"""Reports as text for a terminal: `hpcgrade grade` and `hpcgrade submit`."""
from __future__ import annotations

from pathlib import Path


def summary(path: Path | str, report: dict) -> str:
    """A report (the harness's, or a submission from the API) as text for a terminal."""
    if report.get("status") != "graded":
        reason = report.get("error") or report.get("message") or report.get("status")
        return f"{path}: the grader failed ({reason}); this is not a grade."
    lines = [f"{report['exercise']} — {path}: {report['score']:g} / {report['max_score']:g}"]
    if report.get("penalty"):
        lines[0] += f" (late {report['late_days']} d: −{report['penalty']:.0%})"
    for c in report["checks"]:
        mark = "✔" if c["passed"] else "✘"
        lines.append(f"  {mark} {c['title']}  ({c['points']:g}/{c['max_points']:g})")
        for d in c["diagnostics"]:
            line = d["details"].get("line")
            where = f" [{'línea' if report.get('lang') == 'es' else 'line'} {line}]" if line else ""
            lines += [f"      {d['code']}: {d['message']}{where}", f"      → {d['hint']}"]
    for note in report.get("notes", []):
        if note.get("kind") == "cell-error":
            lines.append(f"  note: {note['cell']} raised {note['type']}: {note['message']}")
        elif note.get("kind") == "empty":
            lines.append("  note: the file is empty")
        else:
            lines.append(f"  note: {note['cell']}: IPython lines {note['lines']} were not run")
    if report.get("output"):
        lines.append("  output:\n" + "\n".join("    " + l for l in report["output"].splitlines()[:20]))
    if "sandbox" in report:
        lines.append(f"  sandbox: {', '.join(report['sandbox'].get('layers', [])) or 'none'}"
                     f"; {report['timing']['total'] * 1000:.0f} ms")
    return "\n".join(lines)
