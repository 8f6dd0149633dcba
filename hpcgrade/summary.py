"""Reports as text for a terminal: `hpcgrade grade`, `check` and `submit`, and `%hpcgrade`.

In the report's language, from the portal's own catalogue (read with the standard library's
gettext: neither command loads Flask), with the inline Markdown of titles, diagnostics and hints
rendered for a terminal: styled where `styled` says so, otherwise plain text without its marks.
"""
from __future__ import annotations

import gettext
import re
from pathlib import Path

from worker.harness.report import ADVICE, LOAD_ERROR

from server.core.inline_markdown import CONTROL, to_terminal

CATALOGUES = Path(__file__).resolve().parents[1] / "server" / "translations"


def translator(lang: str) -> gettext.NullTranslations:
    """The catalogue of `lang`; English where it is not compiled (scripts/translations)."""
    return gettext.translation("messages", CATALOGUES, languages=[lang], fallback=True)


def summary(path: Path | str, report: dict, lang: str | None = None, styled: bool = False) -> str:
    """A report (the harness's, or a submission from the API) as text for a terminal."""
    text = _Text(path, lang or report.get("lang") or "en", styled)
    if report.get("status") == "cancelled":  # the server's message says what it means
        return f"{path}: {text.md(report.get('message'))}"
    if report.get("status") != "graded":
        reason = report.get("error") or report.get("message") or report.get("status")
        return text._("%(file)s: the grader failed (%(reason)s); this is not a grade.") % {
            "file": path, "reason": text.md(reason)}
    notes = report.get("notes", [])
    unloaded = [n for n in notes if n.get("kind") == LOAD_ERROR]
    return "\n".join([text.score(report), *text.load_errors(unloaded),
                      *text.checks(report["checks"], bool(unloaded)), *text.notes(notes),
                      *text.output(report)])


class _Text:
    """The parts of a summary, in one language, naming one file."""

    def __init__(self, path: Path | str, lang: str, styled: bool):
        self.path, self.styled = path, styled
        self.catalogue = translator(lang)
        self._ = self.catalogue.gettext

    def md(self, text: str | None) -> str:
        return to_terminal(text, self.styled)

    @staticmethod
    def plain(text: str) -> str:
        """A student's own text (an exception's message, what the code printed) without the
        escape sequences and control bytes that would drive the terminal."""
        return CONTROL.sub("", text)

    def where(self, label: str | None, line: int | None, with_file: bool = True) -> str:
        """"work.ipynb, cell 2, line 3", as the result page says it."""
        cell = re.fullmatch(r"cell (\d+)", label or "")
        return ", ".join(([str(self.path)] if with_file else []) + (
            [self._("cell %(num)s") % {"num": cell[1]}] if cell else []) + (
            [self._("line %(num)s") % {"num": line}] if line else []))

    def score(self, report: dict) -> str:
        """The score that counts: the API's counted_score (an instructor's adjustment, where one
        was made); the harness's own report has only its score."""
        counted = report.get("counted_score", report["score"])
        line = f"{report['exercise']} — {self.path}: {counted:g} / {report['max_score']:g}"
        if report.get("override"):
            line += f" ({self._('adjusted by an instructor')})"
        if report.get("penalty"):
            line += " (" + self.catalogue.ngettext(
                "%(num)s day late: −%(percent)s%%", "%(num)s days late: −%(percent)s%%",
                report["late_days"]) % {"num": report["late_days"],
                                        "percent": round(report["penalty"] * 100)} + ")"
        return line

    def diagnostic(self, d: dict, always_placed: bool = False) -> list[str]:
        line = d["details"].get("line")
        place = f" ({self.where(d['details'].get('file'), line)})" if line or always_placed else ""
        return [f"      {d['code']}: {self.md(d['message'])}{place}", f"      → {self.md(d['hint'])}"]

    def load_errors(self, unloaded: list[dict]) -> list[str]:
        """Why no check could run, said once, before the checks."""
        lines = ["  " + self._("The checks could not run")] if unloaded else []
        for d in unloaded:
            lines += self.diagnostic(d, always_placed=True)
        return lines

    def checks(self, checks: list[dict], unloaded: bool) -> list[str]:
        lines = []
        for c in checks:
            mark = "✔" if c["passed"] else "✘"
            lines.append(f"  {mark} {self.md(c['title'])}  ({c['points']:g} / {c['max_points']:g})")
            for d in c["diagnostics"]:
                lines += self.diagnostic(d)
            if unloaded and not c["passed"] and not c["diagnostics"]:
                lines.append("      " + self._("Not run: see why above."))
        return lines

    def notes(self, notes: list[dict]) -> list[str]:
        lines = []
        for note in notes:
            if note.get("kind") == "cell-error":
                frame = (note.get("frames") or [{}])[-1]
                line = frame.get("line") if frame.get("file") == note["cell"] else None
                lines.append("  " + self._("Note: %(place)s raised %(error)s") % {
                    "place": self.where(note["cell"], line, with_file=False),
                    "error": self.plain(f"{note['type']}: {note['message']}")})
            elif note.get("kind") == ADVICE:
                lines.append("  " + self._("Advice, not graded:") + " " + self.md(note["message"]))
            elif note.get("kind") == "empty":
                lines.append("  " + self._("Note: the file is empty"))
            elif note.get("kind") == "neutralised":
                count = len(note["lines"])
                lines.append("  " + self.catalogue.ngettext(
                    "Note: in %(place)s, IPython line %(lines)s was not run.",
                    "Note: in %(place)s, IPython lines %(lines)s were not run.", count) % {
                    "place": self.where(note["cell"], None, with_file=False),
                    "lines": ", ".join(map(str, note["lines"])), "num": count})
        return lines

    def output(self, report: dict) -> list[str]:
        lines = []
        if report.get("output"):
            lines.append(f"  {self._('What the code printed')}:\n" + "\n".join(
                "    " + self.plain(line) for line in report["output"].splitlines()[:20]))
        if "sandbox" in report:  # `hpcgrade grade`'s report: where and how fast it ran
            lines.append(f"  sandbox: {', '.join(report['sandbox'].get('layers', [])) or 'none'}"
                         f"; {report['timing']['total'] * 1000:.0f} ms")
        return lines
