"""Diagnostic codes: what went wrong in a student's code, with a message and a hint in each language.

Checks raise `Fail(Diagnostic(...))`; the classifiers here turn a comparison of the student's
values or gradients against the expected ones into the most specific code that fits.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

import torch

from worker.harness.codes import (
    ACCUMULATED_PATTERN,
    CATALOGUE,
    GRAD_CLEARED,
    LANGUAGES,
    WRONG_NUMBER,
    WRONG_TYPE,
)

# A mistake an earlier check of the same submission already explained: said once, there.
SAME_AS = (
    "{what}: most likely the same mistake as in “{same_as}”, explained there.",
    "Fix it there first, then look at this check again.",
    "{what}: lo más probable es que sea el mismo error que en «{same_as}», explicado allí.",
    "Corrígelo allí primero y vuelve después a esta comprobación.",
)

# A wrong gradient of a function whose values an earlier check found wrong.
FOLLOWS = (
    "{what} is wrong too, most likely because the values it is the gradient of are wrong: see "
    "“{follows}”.",
    "Fix the values there first: the gradient of the right values may well be right.",
    "{what} también es incorrecto, lo más probable porque son incorrectos los valores de los que "
    "es el gradiente: mira «{follows}».",
    "Corrige primero allí los valores: el gradiente de los valores correctos bien puede ser "
    "correcto.",
)


class _Lenient(dict):
    def __missing__(self, key: str) -> str:
        return "?"


class _Formatter(string.Formatter):
    def format_field(self, value: Any, spec: str) -> str:
        try:
            return super().format_field(value, spec)
        except (ValueError, TypeError):
            return str(value)


_FORMATTER = _Formatter()


@dataclass(frozen=True)
class Diagnostic:
    code: str
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CATALOGUE:
            raise ValueError(f"unknown diagnostic code {self.code!r}")

    def text(self, lang: str) -> tuple[str, str]:
        """Message and hint in `lang`. A check may word `what`, `hint` and `error` per language."""
        if "same_as" in self.details:
            templates = SAME_AS
        elif "follows" in self.details:
            templates = FOLLOWS
        elif "got_type" in self.details:
            templates = WRONG_TYPE
        elif self.code == "grad-accumulated" and "factor" not in self.details:
            templates = ACCUMULATED_PATTERN
        elif (
            self.code in ("output-mismatch", "grad-mismatch")
            and self.details.get("worst_index") == []
        ):
            templates = WRONG_NUMBER
        else:
            templates = CATALOGUE[self.code]
        en_msg, en_hint, es_msg, es_hint = templates
        message, hint = (es_msg, es_hint) if lang == "es" else (en_msg, en_hint)
        values = _Lenient(self.details)
        values.setdefault("what", {"en": "the result", "es": "el resultado"})
        for key in (
            "what",
            "hint",
            "error",
            "same_as",
            "follows",
            "shows",
        ):  # each may be worded per language
            if isinstance(values.get(key), dict):
                values[key] = values[key].get(lang) or values[key].get("en", "?")
        if not values.get("error"):
            message = message.replace(": {error}", "")
        if values.get("hint"):
            hint = values["hint"]
        elif values.get("shows"):  # what the values show, where nothing names the mistake
            hint = values["shows"].replace("{", "{{").replace("}", "}}")
        return _FORMATTER.vformat(message, (), values), _FORMATTER.vformat(hint, (), values)

    def to_dict(self, lang: str) -> dict:
        message, hint = self.text(lang)
        return {
            "code": self.code,
            "message": message,
            "hint": hint,
            "details": self.details,
            "translations": {
                other: dict(zip(("message", "hint"), self.text(other))) for other in LANGUAGES
            },
        }


class Fail(Exception):
    """Raised by a check: the submission loses this check's points for these reasons."""

    def __init__(self, *diagnostics: Diagnostic):
        super().__init__(", ".join(d.code for d in diagnostics))
        self.diagnostics = list(diagnostics)


# --- classifiers -----------------------------------------------------------------------------


def short(x: Any) -> Any:
    return round(x, 6) if isinstance(x, float) else x


def value_error_details(actual: torch.Tensor, expected: torch.Tensor) -> dict:
    a, e = actual.double(), expected.double()
    diff = (a - e).abs()
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    flat = int(diff.reshape(-1).argmax()) if diff.numel() else 0
    worst = list(torch.unravel_index(torch.tensor(flat), tuple(e.shape))) if e.dim() else []
    rel = diff / e.abs().clamp_min(1e-12)
    return {
        "max_abs_error": float(diff.max()) if diff.numel() else 0.0,
        "max_rel_error": float(rel.max()) if rel.numel() else 0.0,
        "worst_index": [int(i) for i in worst],
        "got": short(float(a.reshape(-1)[flat])) if a.numel() else None,
        "expected": short(float(e.reshape(-1)[flat])) if e.numel() else None,
    }


def close(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> bool:
    return bool(torch.allclose(actual.double(), expected.double(), rtol=rtol, atol=atol))


def compare_values(
    actual: torch.Tensor,
    expected: torch.Tensor,
    what: str,
    *,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> Diagnostic | None:
    if tuple(actual.shape) != tuple(expected.shape):
        return Diagnostic(
            "shape-mismatch",
            {"what": what, "got": list(actual.shape), "expected": list(expected.shape)},
        )
    if close(actual, expected, rtol, atol):
        return None
    return Diagnostic(
        "output-mismatch",
        {
            "what": what,
            **value_error_details(actual, expected),
            **shown(actual, expected, rtol, atol),
        },
    )


def shown(actual: torch.Tensor, expected: torch.Tensor, rtol: float, atol: float) -> dict:
    """`shows`: words for a relation the wrong values bear to the expected ones as a whole (a
    factor, an offset, two dimensions swapped, a shift by one, another order), if one holds;
    facts about the values, computed here, never about the code."""
    if actual.numel() == 0 or not (actual.is_floating_point() and expected.is_floating_point()):
        return {}
    a, e = actual.double(), expected.double()
    if not bool(torch.isfinite(a).all() and torch.isfinite(e).all()):
        return {}
    if a.numel() == 1:  # one number: only its sign says something (a factor or an offset
        # takes any number to any other)
        return {"shows": SHOWS["sign-one"]} if bool(e.any()) and close(a, -e, rtol, atol) else {}
    words = _relation(a, e, rtol, atol)
    return {"shows": words} if words else {}


def _relation(a: torch.Tensor, e: torch.Tensor, rtol: float, atol: float) -> dict | None:
    factor = scale_factor(a, e)
    if factor is not None and close(a, factor * e, rtol, atol):
        if abs(factor + 1) < 1e-3:
            return SHOWS["sign"]
        return {lang: text.format(factor=f"{factor:.4g}") for lang, text in SHOWS["factor"].items()}
    offset = float((a - e).mean())
    if close(a, e + offset, rtol, atol):
        return {lang: text.format(offset=f"{offset:.4g}") for lang, text in SHOWS["offset"].items()}
    for first in range(a.dim()):
        for second in range(first + 1, a.dim()):
            if a.shape[first] == a.shape[second] and close(
                a, e.transpose(first, second), rtol, atol
            ):
                return {
                    lang: text.format(first=first, second=second)
                    for lang, text in SHOWS["swapped"].items()
                }
    for dim, size in enumerate(a.shape):
        if size >= 3 and any(
            close(a.narrow(dim, ahead, size - 1), e.narrow(dim, 1 - ahead, size - 1), rtol, atol)
            for ahead in (0, 1)
        ):
            return {lang: text.format(dim=dim) for lang, text in SHOWS["shifted"].items()}
    if close(a.reshape(-1).sort().values, e.reshape(-1).sort().values, rtol, atol):
        return SHOWS["reordered"]
    return None


SHOWS = {
    "sign-one": {
        "en": "Your value is the expected one with the opposite sign: look for a sign, or "
        "the operands of a subtraction the other way round.",
        "es": "Tu valor es el esperado con el signo contrario: busca un signo, o los "
        "operandos de una resta al revés.",
    },
    "sign": {
        "en": "Your values are the expected ones with the opposite sign: look for a sign, or "
        "the operands of a subtraction the other way round.",
        "es": "Tus valores son los esperados con el signo contrario: busca un signo, o los "
        "operandos de una resta al revés.",
    },
    "factor": {
        "en": "Your values are {factor} times the expected ones, everywhere: a factor "
        "differs (a sum for a mean, a division left out or made twice).",
        "es": "Tus valores son {factor} veces los esperados, en todas partes: difiere un "
        "factor (una suma en lugar de una media, una división que falta o se hace "
        "dos veces).",
    },
    "offset": {
        "en": "Your values differ from the expected ones by the same amount, {offset}, "
        "everywhere: a term is added or left out.",
        "es": "Tus valores difieren de los esperados en la misma cantidad, {offset}, en "
        "todas partes: sobra o falta un término.",
    },
    "swapped": {
        "en": "Your values are the expected ones with dimensions {first} and {second} "
        "swapped: a transpose or permute, or the dimension a reduction or an index "
        "runs over.",
        "es": "Tus valores son los esperados con las dimensiones {first} y {second} "
        "intercambiadas: una transposición o un permute, o la dimensión sobre la "
        "que actúa una reducción o un índice.",
    },
    "shifted": {
        "en": "Your values are the expected ones shifted by one position along dimension "
        "{dim}: a bound of a slice, window or range is off by one.",
        "es": "Tus valores son los esperados desplazados una posición a lo largo de la "
        "dimensión {dim}: un límite de un slice, una ventana o un range está "
        "desplazado en uno.",
    },
    "reordered": {
        "en": "Your values are the expected ones in another order: the order of the "
        "dimensions (a reshape or view where a permute is needed) or of the "
        "elements.",
        "es": "Tus valores son los esperados en otro orden: el de las dimensiones (un "
        "reshape o un view donde hace falta un permute) o el de los elementos.",
    },
}


def scale_factor(actual: torch.Tensor, expected: torch.Tensor) -> float | None:
    """The c for which actual ≈ c·expected, by least squares; None when expected is zero."""
    a, e = actual.double().reshape(-1), expected.double().reshape(-1)
    norm = float(e @ e)
    return float(a @ e) / norm if norm > 0 else None


def compare_grad(
    actual: torch.Tensor | None,
    expected: torch.Tensor,
    what: str,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-6,
) -> Diagnostic | None:
    """None if right; otherwise the most specific gradient diagnostic."""
    if actual is None:
        return Diagnostic("grad-none", {"what": what})
    if tuple(actual.shape) != tuple(expected.shape):
        return Diagnostic(
            "shape-mismatch",
            {"what": what, "got": list(actual.shape), "expected": list(expected.shape)},
        )
    if actual.is_floating_point() and not bool(torch.isfinite(actual).all()):
        return Diagnostic("grad-nonfinite", {"what": what})
    if close(actual, expected, rtol, atol):
        return None
    if not bool(actual.any()):  # a scale of 0: nothing reached it, or it was cleared before use
        return Diagnostic(
            "grad-mismatch",
            {"what": what, "hint": GRAD_CLEARED, **value_error_details(actual, expected)},
        )
    factor = scale_factor(actual, expected)
    if factor is not None and close(actual, factor * expected.double(), rtol, atol):
        details = {"what": what, "factor": round(factor, 6)}
        if abs(factor + 1) < 1e-3:
            return Diagnostic("grad-sign-flipped", {"what": what})
        rounded = round(factor)
        if rounded >= 2 and abs(factor - rounded) < 1e-3:
            return Diagnostic("grad-accumulated", dict(details, factor=rounded))
        return Diagnostic("grad-scaled", details)
    return Diagnostic(
        "grad-mismatch",
        {
            "what": what,
            **value_error_details(actual, expected),
            **shown(actual, expected, rtol, atol),
        },
    )
