"""Reports as text for a terminal (`hpcgrade grade`, `check` and `submit`, and `%hpcgrade`
outside a notebook) and as HTML for a notebook (`%hpcgrade` in Jupyter).

In the report's language, from the portal's own catalogue (read with the standard library's
gettext: neither command loads Flask), with the inline Markdown of titles, diagnostics and hints
rendered for a terminal (styled where `styled` says so, otherwise plain text without its marks)
or, in HTML, as the result page renders it: the same words, the same marks.
"""

from __future__ import annotations

import gettext
import html
import re
from pathlib import Path

from server.core import inline_markdown
from server.core.inline_markdown import CONTROL, spans, to_terminal
from worker.harness.report import ADVICE, LOAD_ERROR

# beside the core's modules, wherever they are: the checkout, or the client's own _grader/
CATALOGUES = Path(inline_markdown.__file__).resolve().parents[1] / "translations"
# `hpcgrade check`'s own note: a cell (or the file) that does not compile, which `submit` refuses
DOES_NOT_COMPILE = "does-not-compile"
# the colours of a check passed and failed, and of a place, in a notebook's output
COLOURS = {"passed": "#1a7f37", "failed": "#cf222e", "muted": "#57606a"}


def translator(lang: str) -> gettext.NullTranslations:
    """The catalogue of `lang`; English where it is not compiled (scripts/translations)."""
    return gettext.translation("messages", CATALOGUES, languages=[lang], fallback=True)


def has_grade(report: dict) -> bool:
    """A grade the summary can show: graded, with its score, its maximum and its checks. What a
    server sends with less (an older or broken one) is said as no grade, never a traceback."""
    score = report.get("counted_score", report.get("score"))
    return (
        report.get("status") == "graded"
        and isinstance(score, (int, float))
        and isinstance(report.get("max_score"), (int, float))
        and isinstance(report.get("checks"), list)
    )


def summary(path: Path | str, report: dict, lang: str | None = None, styled: bool = False) -> str:
    """A report (the harness's, or a submission from the API) as text for a terminal."""
    text = _Text(path, lang or report.get("lang") or "en", styled)
    if not has_grade(report):
        return text.not_graded(report)
    notes = report.get("notes", [])
    unloaded = [n for n in notes if n.get("kind") == LOAD_ERROR]
    return "\n".join(
        [
            text.score(report),
            *text.load_errors(unloaded),
            *text.checks(report["checks"], bool(unloaded)),
            *text.notes(notes),
            *text.output(report),
        ]
    )


def summary_html(path: Path | str, report: dict, lang: str | None = None) -> str:
    """The same report as HTML, for a notebook's output: the words and marks of the result page
    (✔ and ✘, each diagnostic's code, message and hint with their inline Markdown)."""
    text = _Html(path, lang or report.get("lang") or "en")
    if not has_grade(report):
        return f'<div class="hpcgrade-report"><p>{text.not_graded(report)}</p></div>'
    notes = report.get("notes", [])
    unloaded = [n for n in notes if n.get("kind") == LOAD_ERROR]
    return "\n".join(
        [
            '<div class="hpcgrade-report">',
            f"<p><strong>{text.score(report)}</strong></p>",
            *text.load_errors(unloaded),
            *text.checks(report["checks"], bool(unloaded)),
            *(f"<p>{note.strip()}</p>" for note in text.notes(notes)),
            *text.output(report),
            "</div>",
        ]
    )


class _Text:
    """The parts of a summary, in one language, naming one file."""

    def __init__(self, path: Path | str, lang: str, styled: bool):
        self.path, self.styled = path, styled
        self.catalogue = translator(lang)
        self._ = self.catalogue.gettext

    @property
    def file(self) -> str:
        return str(self.path)

    def md(self, text: str | None) -> str:
        return to_terminal(text, self.styled)

    @staticmethod
    def plain(text: str) -> str:
        """A student's own text (an exception's message, what the code printed) without the
        escape sequences and control bytes that would drive the terminal."""
        return CONTROL.sub("", text)

    def not_graded(self, report: dict) -> str:
        if report.get("status") == "cancelled":  # the server's message says what it means
            return f"{self.file}: {self.md(report.get('message'))}"
        reason = report.get("error") or report.get("message")
        if not reason:
            reason = (
                self._("no score came with it")
                if report.get("status") == "graded"
                else report.get("status")
            )
        return self._("%(file)s: the grader failed (%(reason)s); this is not a grade.") % {
            "file": self.file,
            "reason": self.md(reason),
        }

    def where(self, label: str | None, line: int | None, with_file: bool = True) -> str:
        """ "work.ipynb, cell 2, line 3", as the result page says it."""
        cell = re.fullmatch(r"cell (\d+)", label or "")
        return ", ".join(
            ([self.file] if with_file else [])
            + ([self._("cell %(num)s") % {"num": cell[1]}] if cell else [])
            + ([self._("line %(num)s") % {"num": line}] if line else [])
        )

    def adjusted_by(self, role: str | None) -> str:
        """Who adjusted the score, by their role in the course, as the result page says it."""
        if role == "ta":
            return self._("adjusted by a teaching assistant")
        if role == "instructor":
            return self._("adjusted by an instructor")
        return self._("adjusted by the course's staff")

    def score(self, report: dict) -> str:
        """The score that counts: the API's counted_score (the staff's adjustment, where one
        was made, said with the adjuster's role); the harness's own report has only its score."""
        counted = report.get("counted_score", report["score"])
        line = f"{report['exercise']} — {self.file}: {counted:g} / {report['max_score']:g}"
        if report.get("override"):
            line += f" ({self.adjusted_by(report['override'].get('by'))})"
        if report.get("penalty"):
            line += (
                " ("
                + self.catalogue.ngettext(
                    "%(num)s day late: −%(percent)s%%",
                    "%(num)s days late: −%(percent)s%%",
                    report["late_days"],
                )
                % {"num": report["late_days"], "percent": round(report["penalty"] * 100)}
                + ")"
            )
        return line

    def diagnostic(self, d: dict, always_placed: bool = False) -> list[str]:
        line = d["details"].get("line")
        place = f" ({self.where(d['details'].get('file'), line)})" if line or always_placed else ""
        return [
            f"      {d['code']}: {self.md(d['message'])}{place}",
            f"      → {self.md(d['hint'])}",
        ]

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
                lines.append(
                    "  "
                    + self._("Note: %(place)s raised %(error)s")
                    % {
                        "place": self.where(note["cell"], line, with_file=False),
                        "error": self.plain(f"{note['type']}: {note['message']}"),
                    }
                )
            elif note.get("kind") == ADVICE:
                lines.append("  " + self._("Advice, not graded:") + " " + self.md(note["message"]))
            elif note.get("kind") == "empty":
                lines.append("  " + self._("Note: the file is empty"))
            elif note.get("kind") == "neutralised":
                count = len(note["lines"])
                lines.append(
                    "  "
                    + self.catalogue.ngettext(
                        "Note: in %(place)s, IPython line %(lines)s was not run.",
                        "Note: in %(place)s, IPython lines %(lines)s were not run.",
                        count,
                    )
                    % {
                        "place": self.where(note["cell"], None, with_file=False),
                        "lines": ", ".join(map(str, note["lines"])),
                        "num": count,
                    }
                )
            elif note.get("kind") == DOES_NOT_COMPILE:
                lines.append(
                    "  "
                    + self._(
                        "Warning: %(place)s does not compile (%(error)s): submitting this file would "
                        "be refused. Fix it first (a refusal uses no attempt)."
                    )
                    % {
                        "place": self.where(note.get("cell"), note.get("line")),
                        "error": self.plain(note["message"]),
                    }
                )
        return lines

    def output(self, report: dict) -> list[str]:
        lines = []
        if report.get("output"):
            lines.append(
                f"  {self._('What the code printed')}:\n"
                + "\n".join(
                    "    " + self.plain(line) for line in report["output"].splitlines()[:20]
                )
            )
        if "sandbox" in report:  # `hpcgrade grade`'s report: where and how fast it ran
            lines.append(
                f"  sandbox: {', '.join(report['sandbox'].get('layers', [])) or 'none'}"
                f"; {report['timing']['total'] * 1000:.0f} ms"
            )
        return lines


class _Html(_Text):
    """The parts of a summary as HTML: the student's own text escaped, the inline Markdown as
    the result page renders it (`code`, *em*, **strong**)."""

    def __init__(self, path: Path | str, lang: str):
        super().__init__(path, lang, styled=False)

    @property
    def file(self) -> str:
        return html.escape(str(self.path))

    def md(self, text: str | None) -> str:
        return "".join(
            "".join(f"<{s}>" for s in styles)
            + html.escape(piece)
            + "".join(f"</{s}>" for s in reversed(styles))
            for styles, piece in spans(CONTROL.sub("", text or ""))
        )

    @staticmethod
    def plain(text: str) -> str:
        return html.escape(CONTROL.sub("", text))

    def diagnostic(self, d: dict, always_placed: bool = False) -> list[str]:
        line = d["details"].get("line")
        place = (
            f' <span style="color:{COLOURS["muted"]}">('
            f"{self.where(d['details'].get('file'), line)})</span>"
            if line or always_placed
            else ""
        )
        return [
            f'<p style="margin:0.3em 0 0 1.5em"><code>{html.escape(d["code"])}</code> '
            f"{self.md(d['message'])}{place}</p>",
            f'<p style="margin:0.1em 0 0 1.5em">→ {self.md(d["hint"])}</p>',
        ]

    def load_errors(self, unloaded: list[dict]) -> list[str]:
        if not unloaded:
            return []
        return [
            f'<div style="border-left:4px solid {COLOURS["failed"]};padding-left:0.6em">',
            f'<p style="margin:0"><strong>{self._("The checks could not run")}</strong></p>',
            *(line for d in unloaded for line in self.diagnostic(d, always_placed=True)),
            "</div>",
        ]

    def checks(self, checks: list[dict], unloaded: bool) -> list[str]:
        lines = []
        for c in checks:
            state = "passed" if c["passed"] else "failed"
            lines += [
                f'<div style="border-left:4px solid {COLOURS[state]};padding-left:0.6em;'
                'margin:0.4em 0">',
                f'<p style="margin:0"><span style="color:{COLOURS[state]}">'
                f"{'✔' if c['passed'] else '✘'}</span> <strong>{self.md(c['title'])}"
                f"</strong> <small>({c['points']:g} / {c['max_points']:g})</small></p>",
            ]
            for d in c["diagnostics"]:
                lines += self.diagnostic(d)
            if unloaded and not c["passed"] and not c["diagnostics"]:
                lines.append(
                    f'<p style="margin:0.3em 0 0 1.5em;color:{COLOURS["muted"]}">'
                    f"{self._('Not run: see why above.')}</p>"
                )
            lines.append("</div>")
        return lines

    def output(self, report: dict) -> list[str]:
        if not report.get("output"):
            return []
        printed = "\n".join(report["output"].splitlines()[:20])
        return [
            f"<details><summary>{self._('What the code printed')}</summary>"
            f"<pre>{self.plain(printed)}</pre></details>"
        ]
