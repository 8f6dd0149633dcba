"""The little Markdown that check titles, diagnostics and hints use: `code`, *emphasis* and
**strong**, parsed here, and written for a terminal (ANSI styles, or plain text); a page's HTML
is server/web/markup.py's.

Nothing else is Markdown here: every other character, a tag, an attribute, a link or an image
included, is shown as the text it is. The texts mix the exercises' words with the students' own
(an exception's message), so an asterisk counts only where it cannot be arithmetic: an opening
one not preceded by a letter or digit, a closing one not followed by one (`a*b*c` stays as is).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

# a run of backticks opens a code span that the next run of the same length closes (CommonMark)
CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.DOTALL)
EMPHASIS = re.compile(r"(?<![\w*])(\*\*?)(?![\s*])(.+?)(?<![\s*])\1(?![\w*])", re.DOTALL)
STYLES = {"*": "em", "**": "strong"}  # also the HTML elements' names
# where a code span waits while emphasis is looked for around it (private-use characters, which
# are dropped from the text)
HOLD = ("\ue000", "\ue001")
HELD = re.compile(f"{HOLD[0]}(\\d+){HOLD[1]}")
ANSI = {
    "code": ("\x1b[36m", "\x1b[39m"),
    "em": ("\x1b[3m", "\x1b[23m"),
    "strong": ("\x1b[1m", "\x1b[22m"),
}
# what a student's text must not send to a terminal: escape sequences and other control bytes
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def spans(text: str) -> Iterator[tuple[tuple[str, ...], str]]:
    """The text as (styles, text) pieces: styles () for plain text, ("strong", "code") for code
    in bold. Code spans are found first (nothing inside them is Markdown), emphasis around them."""
    codes: list[str] = []

    def hold(found: re.Match) -> str:
        codes.append(_trim(found.group(2)))
        return f"{HOLD[0]}{len(codes) - 1}{HOLD[1]}"

    held = CODE.sub(hold, text.replace(HOLD[0], "").replace(HOLD[1], ""))
    for outer, piece in _emphasis(held):
        for index, part in enumerate(HELD.split(piece)):
            if index % 2:
                yield outer + ("code",), codes[int(part)]
            elif part:
                yield outer, part


def _emphasis(text: str) -> Iterator[tuple[tuple[str, ...], str]]:
    start = 0
    for found in EMPHASIS.finditer(text):
        yield (), text[start : found.start()]
        yield (STYLES[found.group(1)],), found.group(2)
        start = found.end()
    yield (), text[start:]


def _trim(code: str) -> str:
    # CommonMark: one space on each side lets a span start or end with a backtick
    return code[1:-1] if len(code) > 2 and code[0] == code[-1] == " " and code.strip() else code


def to_terminal(text: str | None, styled: bool) -> str:
    """For a terminal: with ANSI styles when `styled`, otherwise plain text without the marks."""
    pieces = []
    for styles, piece in spans(CONTROL.sub("", text or "")):
        active = styles if styled else ()
        pieces.append(
            "".join(ANSI[s][0] for s in active)
            + piece
            + "".join(ANSI[s][1] for s in reversed(active))
        )
    return "".join(pieces)
