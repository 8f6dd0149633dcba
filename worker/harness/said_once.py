"""One mistake, explained once: by the first check that sees it, not echoed by each later one.

A later check that fails for the same reason (the same code on the same value, the same error),
or with what a cause an earlier check of the same function found brings about (a leaf replaced
leaves no gradient where one was expected), still loses its points, but its diagnostic points
at the earlier check. A gradient that is wrong after the same function's values were found
wrong says so and points at those values: the gradient of wrong values is wrong too, and a hint
of its own would send the student after a second mistake that may not be there.
"""

from __future__ import annotations

from worker.harness.checks import CheckSpec
from worker.harness.diagnostics import Diagnostic

# a cause, and the codes later checks of the same function fail with because of it; never a
# plain exception or wrong values, which may well be another mistake
CONSEQUENCES = {
    "leaf-replaced": frozenset(
        {"leaf-replaced", "grad-none", "grad-accumulated", "frozen-param-changed"}
    ),
    "detached-output": frozenset({"detached-output", "grad-none"}),
    "tracked-in-inference": frozenset({"tracked-in-inference"}),
    "requires-grad-wrong": frozenset({"requires-grad-wrong", "frozen-param-changed", "grad-none"}),
    "custom-function-unused": frozenset({"custom-function-unused", "custom-backward-mismatch"}),
    "nonscalar-backward": frozenset({"nonscalar-backward"}),
    "graph-freed": frozenset({"graph-freed"}),
    "inplace-modified": frozenset({"inplace-modified"}),
}
# wrong values, and the gradients they bring about: said as following from them
WRONG_VALUES = frozenset({"output-mismatch", "shape-mismatch"})
WRONG_GRADIENTS = frozenset(
    {"grad-mismatch", "grad-scaled", "grad-sign-flipped", "grad-nonfinite", "grad-accumulated"}
)


def _plain(what: object) -> str:
    return str(what.get("en")) if isinstance(what, dict) else str(what)


class SaidOnce:
    """What the earlier checks of one submission explained."""

    def __init__(self) -> None:
        # (code, what, error) -> (code, where)
        self.explained: dict[tuple[str, str, str], tuple[str, dict]] = {}
        self.causes: dict[str, list[tuple[str, dict]]] = {}  # function -> [(cause, where)]

    def diagnostics(self, spec: CheckSpec, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        out = []
        for diagnostic in diagnostics:
            key = (
                diagnostic.code,
                _plain(diagnostic.details.get("what")),
                _plain(diagnostic.details.get("error")),
            )
            earlier = self.explained.get(key) or next(
                (
                    cause
                    for f in spec.uses
                    for cause in self.causes.get(f, ())
                    if diagnostic.code in CONSEQUENCES.get(cause[0], ())
                ),
                None,
            )
            if earlier is not None:
                code, title = earlier
                out.append(
                    Diagnostic(code, {"what": diagnostic.details.get("what"), "same_as": title})
                )
                continue
            wrong_values = next(
                (
                    title
                    for f in spec.uses
                    for cause, title in self.causes.get(f, ())
                    if cause in WRONG_VALUES
                ),
                None,
            )
            if wrong_values is not None and diagnostic.code in WRONG_GRADIENTS:
                out.append(
                    Diagnostic(
                        diagnostic.code,
                        {"what": diagnostic.details.get("what"), "follows": wrong_values},
                    )
                )
                continue
            out.append(diagnostic)
            self.explained[key] = (diagnostic.code, spec.title)
            if diagnostic.code in CONSEQUENCES or diagnostic.code in WRONG_VALUES:
                for function in spec.uses:
                    self.causes.setdefault(function, []).append((diagnostic.code, spec.title))
        return out
