"""A second look at the checks a submission failed, once every check has run.

It runs them again in a fresh student process, whose time, output and deaths the grade never
sees, so that it cannot cost the submission anything its checks gave it:
- an error inside `backward()` (graph freed, in-place modification) names no line of the
  student's: the check runs again with autograd's anomaly mode on, which records where the
  tensor involved was made;
- a failure of values is compared with the known wrong programs: the check runs again on the
  same inputs with each of them standing in for the reference, and the first one the student's
  code passes with is the mistake it makes; what that program says replaces the general hint;
- a detached output is looked for in the source: the ways out of the graph the grader's reading
  finds in the functions the check calls replace the list of every possible one.
Then the exercise's advice (`@advice` in checks.py) runs there too: words on how the code works,
not graded, as the report's notes.
"""

from __future__ import annotations

import time
import warnings
from types import ModuleType

import torch

from worker.harness import gpu_memory
from worker.harness import report as reports
from worker.harness.budget import Budget
from worker.harness.checks import AdviceSpec, CheckSpec, Context, diagnose_exception
from worker.harness.codes import DETACHED_BACKWARD, LANGUAGES, said_elsewhere
from worker.harness.diagnostics import Diagnostic, Fail
from worker.harness.graph_exits import exits_hint, graph_exits
from worker.harness.launch import ZygoteLost
from worker.harness.session import Session
from worker.harness.source_rules import said_of
from worker.harness.student_process import StudentDied, StudentError

# what the student's code does on its own (it raised, hung, died, behaved at random): no wrong
# program's values explain it
UNRECOGNISABLE = frozenset(
    {
        "missing-function",
        "import-error",
        "exception",
        "timeout",
        "memory-limit",
        "crashed",
        "forbidden-operation",
        "nonscalar-backward",
        "graph-freed",
        "inplace-modified",
        "nondeterministic",
    }
)
BACKWARD_ERRORS = frozenset({"graph-freed", "inplace-modified"})
# the time one submission's second look may take, each of its requests within it; a check
# that took longer than a call may (it is slow, or it hung) is not run again at all, nor in
# anomaly mode (several times slower) one that took more than a third of that
SECONDS = 20.0
ANOMALY_SHARE = 1 / 3


def run_check(
    session: Session,
    spec: CheckSpec | AdviceSpec,
    seed: int,
    index: int,
    reference: ModuleType | None,
) -> object:
    """One check (or advice) on a clean student process, its inputs drawn from the run's seed
    and its place: the same inputs each time it runs."""
    student = session.student()
    student.reset()
    rng = torch.Generator().manual_seed((seed * 1_000_003 + index) % (1 << 63))
    return spec.function(
        Context(
            student,
            rng,
            reference,
            session.exercise.support,
            session.device,
            session.scratch_path,
            tuple(session.source.cells),
        )
    )


class SecondLook:
    def __init__(
        self,
        session: Session,
        seed: int,
        wrong_programs: dict[str, dict],
        budget: Budget,
        passed: list[tuple[int, CheckSpec]],
    ):
        """`budget`: SECONDS, which also bounds each of its requests (the session's limits);
        `passed`: the checks the submission passed, with their places."""
        self.session, self.seed, self.programs, self.budget = session, seed, wrong_programs, budget
        self.passed = passed
        self.spent = 0.0
        # once a process dies here, or the first look's deaths stopped the checks, no more
        self.over = session.fatal is not None

    def diagnostics(
        self, index: int, spec: CheckSpec, diagnostics: list[Diagnostic], seconds: float
    ) -> list[Diagnostic]:
        diagnostics = self._read(spec, diagnostics)
        call_seconds = self.session.limits.limits.call_seconds  # the exercise's, uncapped
        if seconds > call_seconds:
            return diagnostics
        if seconds <= call_seconds * ANOMALY_SHARE:
            diagnostics = self._placed(index, spec, diagnostics)
        return self._recognised(index, spec, diagnostics)

    def advice(self, first_index: int, lang: str) -> list[dict]:
        """The exercise's advice for this submission, as notes; none where its functions did not
        load, or the second look has no time or process left. Advice costs the grade nothing:
        what fails in it is left unsaid."""
        notes = []
        for offset, spec in enumerate(self.session.exercise.advice):
            if self.over or self.budget.spent or self.session.blockers(spec):
                break
            started = time.perf_counter()
            try:
                said = run_check(
                    self.session,
                    spec,
                    self.seed,
                    first_index + offset,
                    self.session.exercise.reference,
                )
            except StudentDied:
                self.over = True
                said = None
            except gpu_memory.Unwatched:  # the grader's failure, never the code's
                self.over = True
                raise
            except ZygoteLost as lost:
                self._zygote_lost(lost)
                said = None
            except Exception:  # noqa: BLE001 - whatever the student's code did, advice is
                said = None  # only ever left out
            finally:
                self.spent += time.perf_counter() - started
            if isinstance(said, dict) and all(isinstance(said.get(k), str) for k in LANGUAGES):
                notes.append(
                    {
                        "kind": reports.ADVICE,
                        "name": spec.name,
                        "message": reports.clip(said[lang if lang in said else "en"]),
                        "translations": {k: {"message": reports.clip(said[k])} for k in LANGUAGES},
                    }
                )
        return notes

    def _read(self, spec: CheckSpec, diagnostics: list[Diagnostic]) -> list[Diagnostic]:
        """A detached output, with the ways out of the graph found in the source (unless what
        PyTorch raised named the way out already)."""
        at = next(
            (
                i
                for i, d in enumerate(diagnostics)
                if d.code == "detached-output"
                and not said_elsewhere(d.details)
                and d.details.get("hint", DETACHED_BACKWARD) is DETACHED_BACKWARD
            ),
            None,
        )
        if at is None:
            return diagnostics
        exits = graph_exits(self.session.source.cells, spec.uses)
        if not exits:
            return diagnostics
        found = diagnostics[at]
        hint = exits_hint(exits, self.session.source.notebook)
        read = Diagnostic(
            found.code,
            dict(found.details, hint=hint, left_at=[[e.kind, e.cell, e.line] for e in exits]),
        )
        return [*diagnostics[:at], read, *diagnostics[at + 1 :]]

    def _placed(
        self, index: int, spec: CheckSpec, diagnostics: list[Diagnostic]
    ) -> list[Diagnostic]:
        """An error inside backward(), at the student's line that made the tensor involved
        rather than at the backward() call (or at no line, when the check called it)."""
        at = next(
            (
                i
                for i, d in enumerate(diagnostics)
                if d.code in BACKWARD_ERRORS and not said_elsewhere(d.details)
            ),
            None,
        )
        if at is None:
            return diagnostics
        found = diagnostics[at]
        again = self._again(index, spec, self.session.exercise.reference, anomaly=True)
        place = next(
            (
                d.details
                for d in again or []
                if d.code == found.code and d.details.get("made_at") and d.details.get("line")
            ),
            None,
        )
        if place is None:
            return diagnostics
        placed = Diagnostic(found.code, dict(found.details, file=place["file"], line=place["line"]))
        return [*diagnostics[:at], placed, *diagnostics[at + 1 :]]

    def _recognised(
        self, index: int, spec: CheckSpec, diagnostics: list[Diagnostic]
    ) -> list[Diagnostic]:
        at = next(
            (
                i
                for i, d in enumerate(diagnostics)
                if d.code not in UNRECOGNISABLE and not said_elsewhere(d.details)
            ),
            None,
        )
        if at is None or not (
            self.session.exercise.wrong_programs or self.session.exercise.derived
        ):
            return diagnostics
        # the same failure first, in the fresh process: one that came from what earlier checks
        # left behind is no mistake of a wrong program's
        again = self._again(index, spec, self.session.exercise.reference)
        if not again or diagnostics[at].code not in {d.code for d in again}:
            return diagnostics
        found = diagnostics[at]
        shared = [(j, other) for j, other in self.passed if set(other.uses) & set(spec.uses)]
        for name, program in self.session.exercise.wrong_programs:
            if self._again(index, spec, program) == [] and self._agrees(program, shared):
                return self._named(
                    diagnostics, at, name, said_of(self.programs[name], self.session.source.cells)
                )
        # words the check chose for these values are the author's: kept
        candidates = self._derived_for(spec) if "hint" not in found.details else []
        for derived, program in candidates:
            if self._again(index, spec, program) == [] and self._agrees(
                program, [(j, other) for j, other in self.passed if self._changes(derived, other)]
            ):
                place = derived.place_in(self.session.source.cells)
                named = self._named(
                    diagnostics,
                    at,
                    derived.name,
                    derived.words(place, self.session.source.notebook),
                )
                # the mistake in words of no one's line, for the course's pages that count it;
                # the code view marks the line the hint names
                details = dict(
                    named[at].details,
                    mistake=derived.words(None, False),
                    **({"file": place[0], "line": place[1]} if place else {}),
                )
                return [*named[:at], Diagnostic(found.code, details), *named[at + 1 :]]
        return diagnostics

    def _derived_for(self, spec: CheckSpec) -> list:
        return [
            (derived, program)
            for derived, program in self.session.exercise.derived
            if self._changes(derived, spec)
        ]

    def _changes(self, derived, spec: CheckSpec) -> bool:
        """Whether a derived program is changed in what the check calls (or in a class, which
        any function may use)."""
        return derived.owner in spec.uses or derived.owner not in self.session.exercise.functions

    def _agrees(self, program: ModuleType, passed: list[tuple[int, CheckSpec]]) -> bool:
        """A wrong program names the mistake only if the code's values are its values in the
        checks the code passed too (a gradient right and a returned loss wrong is no sign flipped
        in the loss); a check that cannot say in time says no. Timed checks are not asked: what
        they compare is the machine's load as much as the code (a busy node took conv2d-einsum's
        speed bonus from its known wrong program's second run, which then named nothing)."""
        return all(
            self._again(index, spec, program) == [] for index, spec in passed if not spec.timed
        )

    @staticmethod
    def _named(
        diagnostics: list[Diagnostic], at: int, name: str, words: dict[str, str]
    ) -> list[Diagnostic]:
        # braces in an instructor's words (or in code) are text, not places for details
        says = {lang: text.replace("{", "{{").replace("}", "}}") for lang, text in words.items()}
        found = diagnostics[at]
        named = Diagnostic(found.code, dict(found.details, hint=says, wrong_program=name))
        return [*diagnostics[:at], named, *diagnostics[at + 1 :]]

    def _again(
        self, index: int, spec: CheckSpec, reference: ModuleType | None, anomaly: bool = False
    ) -> list[Diagnostic] | None:
        """The check run again: [] if it passed, its diagnostics if it failed, None if it could
        not say (no time left, the process died, the wrong program itself raised)."""
        if self.over or self.budget.spent:
            return None
        started = time.perf_counter()
        try:
            if anomaly:
                self.session.student().request("anomaly", on=True)
            with warnings.catch_warnings():  # a wrong program's warnings are no one's to read
                warnings.simplefilter("ignore")
                run_check(self.session, spec, self.seed, index, reference)
            return []
        except Fail as fail:
            return fail.diagnostics
        except StudentError as exc:
            return [diagnose_exception(exc.info, spec.title)]
        except StudentDied:
            self.over = True
            return None
        except gpu_memory.Unwatched:  # the grader's failure, never the code's
            self.over = True
            raise
        except ZygoteLost as lost:
            self._zygote_lost(lost)
            return None
        except Exception:  # noqa: BLE001 - a wrong program that raises on these inputs says
            return None  # nothing about the student's code
        finally:
            self.spent += time.perf_counter() - started
            if anomaly and not self.over:
                self._anomaly_off()

    def _zygote_lost(self, lost: ZygoteLost) -> None:
        """The look ends: a zygote found stopped was stopped by the submission's process (its
        doing: raised, for the grade to score nothing), one that died or hangs leaves the look
        with nothing more to say."""
        self.over = True
        if lost.stopped:
            raise lost

    def _anomaly_off(self) -> None:
        process = self.session.process
        if process is None or not process.alive:  # one made afresh starts with it off
            return
        try:
            self.session.student().request("anomaly", on=False)
        except (StudentDied, StudentError, Fail):
            self.over = True
