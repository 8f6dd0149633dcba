"""The files the README's and docs/clients.md's command blocks give `hpcgrade` exist (issue 23:
`work.ipynb`, `a.py b.py c.ipynb` did not), so that a newcomer can run each line as written."""

import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
FENCE = re.compile(r"^```(?:bash|sh)\n(.*?)^```", re.MULTILINE | re.DOTALL)
STUDENT_FILE = re.compile(r".+\.(?:py|ipynb)$")


def command_lines(document: Path) -> list[str]:
    return [
        line.split(" #")[0]
        for block in FENCE.findall(document.read_text())
        for line in block.splitlines()
        if re.match(r"(?:\.venv/bin/)?hpcgrade ", line)
    ]


@pytest.mark.parametrize("document", ["README.md", "docs/clients.md"])
def test_every_file_a_documented_command_names_exists(document):
    lines = command_lines(ROOT / document)
    named = [
        (line, word) for line in lines for word in shlex.split(line) if STUDENT_FILE.match(word)
    ]
    assert [(line, word) for line, word in named if not (ROOT / word).is_file()] == []
    if document == "docs/clients.md":
        assert len(named) >= 8  # the blocks of submit, check and grade were read
