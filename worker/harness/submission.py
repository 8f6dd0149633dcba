"""Turning an uploaded file into the code cells the student process runs.

A `.py` file is one cell. A notebook's code cells run in order; IPython magics and shell lines
are neutralised (never executed) and noted, and a few cell magics that only wrap code (`%%time`)
keep their body. The lines of hpcgrade's own Jupyter extension (`%load_ext hpcgrade`,
`%hpcgrade submit …`), which every notebook that follows the docs has, are neutralised without a
note: they say nothing about the student's code. All checks on the bytes happen here, in the
grader, before any student process exists.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

WRAPPING_CELL_MAGICS = ("%%time", "%%timeit", "%%capture", "%%prun")
SHELL_OR_MAGIC = re.compile(r"^\s*(?:[%!]|[\w.]+\s*=\s*[%!])|^\s*[\w.]+\?\??\s*$|^\s*\?")
EXTENSION_LINE = re.compile(r"^\s*%(?:(?:re)?load_ext\s+hpcgrade|hpcgrade)\b")


class Unreadable(Exception):
    """The file cannot be graded as code; the message says why, for the student."""

    def __init__(self, en: str, es: str):
        super().__init__(en)
        self.en, self.es = en, es


@dataclass(frozen=True)
class Source:
    cells: tuple[tuple[str, str], ...]
    notebook: bool
    notes: tuple[dict, ...] = ()


def read(data: bytes, filename: str, max_bytes: int) -> Source:
    if len(data) > max_bytes:
        raise Unreadable(
            f"The file is {len(data):,} bytes; the limit is {max_bytes:,}.",
            f"El archivo tiene {_es(len(data))} bytes; el límite es {_es(max_bytes)}.",
        )
    if b"\x00" in data:
        raise Unreadable(
            "The file is binary, not Python source or a notebook.",
            "El archivo es binario, no código Python ni un notebook.",
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(
            f"The file is not UTF-8 text (byte {exc.start}). Save it as UTF-8.",
            f"El archivo no es texto UTF-8 (byte {exc.start}). Guárdalo como UTF-8.",
        ) from None
    if filename.lower().endswith(".ipynb"):  # NOTEBOOK.IPYNB too, as the upload accepts it
        return notebook_cells(text)
    empty = ({"kind": "empty"},) if not text.strip() else ()
    return Source(cells=(("submission.py", text),), notebook=False, notes=empty)


def _es(number: int) -> str:
    """A count as Spain writes it: 1 048 576, not 1,048,576 (a comma is the decimal mark)."""
    return f"{number:,}".replace(",", "\u00a0")


def notebook_cells(text: str) -> Source:
    try:
        nb = json.loads(text)
        cells = nb["cells"]
        if not isinstance(cells, list):
            raise TypeError
    except (ValueError, KeyError, TypeError, RecursionError):
        raise Unreadable(
            "The file is not a valid Jupyter notebook (its JSON cannot be read).",
            "El archivo no es un notebook de Jupyter válido (no se puede leer su JSON).",
        ) from None
    out, notes = [], []
    for number, cell in enumerate(cells, start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        code, neutralised = neutralise(source)
        if neutralised:
            notes.append({"cell": f"cell {number}", "kind": "neutralised", "lines": neutralised})
        out.append((f"cell {number}", code))
    return Source(cells=tuple(out), notebook=True, notes=tuple(notes))


def neutralise(source: str) -> tuple[str, list[int]]:
    """Comment out IPython-only lines; keep line numbers so tracebacks point at the right line.
    The lines listed are those to note: the extension's own are not."""
    lines = source.split("\n")
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        if first.split()[0] in WRAPPING_CELL_MAGICS:
            return "\n".join(["# " + lines[0]] + lines[1:]), [1]
        return "\n".join("# " + line for line in lines), list(range(1, len(lines) + 1))
    neutralised = []
    for i, line in enumerate(lines):
        if SHELL_OR_MAGIC.match(line):
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = f"{indent}pass  # neutralised: {line.strip()}"
            if not EXTENSION_LINE.match(line):
                neutralised.append(i + 1)
    return "\n".join(lines), neutralised
