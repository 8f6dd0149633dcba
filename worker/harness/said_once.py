"""One mistake, explained once: by the first check that sees it, not echoed by each later one.

A later check that fails for the same reason (the same code on the same value), or as a
consequence of a cause an earlier check of the same function found (the leaf was replaced, the
output left the graph), still loses its points, but its diagnostic points at the earlier check.
"""
from __future__ import annotations

from .checks import CheckSpec
from .diagnostics import Diagnostic

# mistakes that make later values wrong as a consequence: the first check to see one explains it
CAUSES = frozenset({"leaf-replaced", "detached-output", "tracked-in-inference",
                    "requires-grad-wrong", "custom-function-unused", "nonscalar-backward",
                    "graph-freed", "inplace-modified"})
CONSEQUENCES = frozenset({"grad-none", "grad-mismatch", "grad-scaled", "grad-accumulated",
                          "grad-sign-flipped", "grad-nonfinite", "output-mismatch", "exception",
                          "frozen-param-changed", *CAUSES})


def _plain(what: object) -> str:
    return str(what.get("en")) if isinstance(what, dict) else str(what)


class SaidOnce:
    """What the earlier checks of one submission explained."""

    def __init__(self) -> None:
        self.explained: dict[tuple[str, str], tuple[str, dict]] = {}  # (code, what) -> where
        self.causes: dict[str, tuple[str, dict]] = {}  # student function -> (code, where)

    def diagnostics(self, spec: CheckSpec, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        out = []
        for diagnostic in diagnostics:
            key = (diagnostic.code, _plain(diagnostic.details.get("what")))
            earlier = self.explained.get(key)
            if earlier is None and diagnostic.code in CONSEQUENCES:
                earlier = next((self.causes[f] for f in spec.uses if f in self.causes), None)
            if earlier is not None:
                code, title = earlier
                out.append(Diagnostic(code, {"what": diagnostic.details.get("what"),
                                             "same_as": title}))
                continue
            out.append(diagnostic)
            self.explained[key] = (diagnostic.code, spec.title)
            if diagnostic.code in CAUSES:
                for function in spec.uses:
                    self.causes.setdefault(function, (diagnostic.code, spec.title))
        return out
