"""The trusted grader: loads an exercise's checks and reference, runs them against a student process.

One `Harness` grades many submissions: the zygote keeps torch imported and warm, so each
submission costs a fork, the sandbox and the checks, not a Python start-up.
"""

from __future__ import annotations

import contextlib
import importlib.util
import re
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

from worker.harness import gpu_memory, sandbox, second_look, submission
from worker.harness import report as reports
from worker.harness.budget import Budget, BudgetedLimits
from worker.harness.checks import AdviceSpec, CheckSpec, diagnose_exception, student_place
from worker.harness.codes import LANGUAGES
from worker.harness.derived import Derived, derive
from worker.harness.diagnostics import Diagnostic, Fail
from worker.harness.jobs import HIDDEN_CHECKS, VISIBLE_CHECKS, Job, Limits, exercise_version
from worker.harness.launch import Zygote, ZygoteLost, child_environment
from worker.harness.said_once import SaidOnce
from worker.harness.second_look import SecondLook, run_check
from worker.harness.session import LOADING, Session
from worker.harness.student_process import (
    NotStarted,
    Output,
    StudentDied,
    StudentError,
    StudentProcess,
)

YOUR_CODE = {"en": "Your code", "es": "Tu código"}
STOPPED_GRADER = {
    "en": "it stopped a process of the grader (a signal to a process that is not its own)",
    "es": "detuvo un proceso del corrector (una señal a un proceso que no es el suyo)",
}


# the modules of an exercise's own programs, which run in this process: its reference, and the
# wrong programs the second look stands in for it
REFERENCE, WRONG, DERIVED = "hpcgrade_reference_", "hpcgrade_wrong_", "hpcgrade_derived_"


def _quiet_about_exercise_code(unraisable) -> None:
    """sys.unraisablehook: a finaliser of an exercise's program that raises (a temporary file
    gone already, say) is that program's business, not the grader's, and was printed on
    `hpcgrade exercise check`'s terminal and in the workers' logs; any other is said as Python
    says it."""
    module = getattr(unraisable.object, "__module__", None) or ""
    if not module.startswith((REFERENCE, WRONG, DERIVED)):
        sys.__unraisablehook__(unraisable)


@dataclass(frozen=True)
class LoadedExercise:
    """An exercise's checks, reference, known wrong programs and support module, imported into
    the grader (the database's row of an exercise is server.core.models.Exercise)."""

    slug: str
    checks: tuple[CheckSpec, ...]
    reference: ModuleType | None  # None for the visible checks, which have no reference
    support: ModuleType | None
    support_source: str | None
    wrong_programs: tuple[tuple[str, ModuleType], ...] = ()
    advice: tuple[AdviceSpec, ...] = ()
    derived: tuple[tuple[Derived, ModuleType], ...] = ()
    # its programs may step a torch optimizer: their zygote pays torch._dynamo's import once
    steps_optimizers: bool = False

    @property
    def functions(self) -> list[str]:
        return sorted({name for spec in self.checks for name in spec.uses})


def _module_from_source(name: str, source: str) -> ModuleType:
    module = ModuleType(name)
    exec(
        compile(source, f"<{name}>", "exec"), module.__dict__
    )  # the reference, changed in one place
    return module


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# `torch.optim`, `from torch import optim`, `optim.SGD`: not "optimizer" or "optimal"
OPTIMIZERS = re.compile(r"\boptim\b")


def load_exercise(
    slug: str, directory: str, checks: str = HIDDEN_CHECKS, wrong_programs: tuple[str, ...] = ()
) -> LoadedExercise:
    """`checks`: checks.py (hidden, with the reference and the known wrong programs, which are
    mutants/<name>.py) or visible.py (the students' own, without either)."""
    root = Path(directory)
    support_path = root / "support.py"
    support_source = support_path.read_text() if support_path.exists() else None
    reference_path = root / "reference.py"
    reference_source = reference_path.read_text() if reference_path.exists() else ""
    # where the exercise's own files use an optimizer, its students' programs step one too
    steps_optimizers = any(
        OPTIMIZERS.search(text)
        for text in ((root / checks).read_text(), reference_source, support_source or "")
    )
    support = _load_module(f"hpcgrade_support_{slug}", support_path) if support_source else None
    checks_module = _load_module(f"hpcgrade_{Path(checks).stem}_{slug}", root / checks)
    specs = tuple(
        f.hpcgrade_check for f in vars(checks_module).values() if hasattr(f, "hpcgrade_check")
    )
    if not specs:
        raise ValueError(f"{root / checks} declares no @check")
    if checks == VISIBLE_CHECKS:
        return LoadedExercise(
            slug, specs, None, support, support_source, steps_optimizers=steps_optimizers
        )
    advice = tuple(
        f.hpcgrade_advice for f in vars(checks_module).values() if hasattr(f, "hpcgrade_advice")
    )
    with _importable_as_exercise_support(support):
        reference = _load_module(f"{REFERENCE}{slug}", reference_path)
        wrong = tuple(
            (name, _load_module(f"{WRONG}{slug}_{name}", root / "mutants" / f"{name}.py"))
            for name in wrong_programs
        )
        derived = tuple(
            (program, _module_from_source(f"{DERIVED}{slug}_{number}", program.source))
            for number, program in enumerate(derive(reference_source))
        )
    return LoadedExercise(
        slug, specs, reference, support, support_source, wrong, advice, derived, steps_optimizers
    )


@contextlib.contextmanager
def _importable_as_exercise_support(support: ModuleType | None) -> Iterator[None]:
    """A solution imports the exercise's support code as `exercise_support` (the student
    process's name for it): the reference and the wrong programs do so here, in the grader."""
    before = sys.modules.get("exercise_support")
    if support is not None:
        sys.modules["exercise_support"] = support
    try:
        yield
    finally:
        if before is None:
            sys.modules.pop("exercise_support", None)
        else:
            sys.modules["exercise_support"] = before


class Harness:
    def __init__(
        self, scratch_root: str | None = None, zygote: Zygote | None = None, sealed: bool = True
    ):
        """`zygote`: one started before torch was imported here, so that its start overlapped.
        `sealed`: each student process sealed (seal.py); False only in tests of what it stops."""
        self.scratch_root = scratch_root
        self.sealed = sealed
        sys.unraisablehook = _quiet_about_exercise_code
        self.start_seconds: float | None = None  # its start's, until its first report says it
        self.read_paths = sandbox.python_read_paths()
        self.exercises: dict[tuple, tuple[str, LoadedExercise]] = {}
        self.zygote = zygote or Zygote(child_environment(), sealed)
        self.nvml: gpu_memory.Nvml | None = None  # opened for the first CUDA student
        try:
            torch.set_num_threads(1)
            _warm_up_autograd()
            self.zygote.wait_ready()
        except BaseException:
            self.zygote.close()
            raise

    def close(self) -> None:
        self.zygote.close()

    def spawn(
        self,
        confinement: sandbox.Confinement,
        limits: Limits,
        output: Output,
        optimizers: bool = False,
    ) -> StudentProcess:
        """A new student process. A zygote that was lost (it stopped answering) is replaced
        first; one that dies on the way (killed by the node's OOM killer, say) is replaced once,
        and a student that ended before it was ready (held ready, it died as it was handed
        over) is made afresh once. `optimizers`: its program may step a torch optimizer."""
        if self.zygote.lost is not None:
            self._replace_zygote()
        try:
            return StudentProcess(self.zygote, confinement, limits, output, optimizers)
        except ZygoteLost as lost:
            if lost.stopped:
                raise
            self._replace_zygote()
        except NotStarted:  # the zygote makes the next one afresh
            pass
        return StudentProcess(self.zygote, confinement, limits, output, optimizers)

    def gpu_memory_used(self) -> Callable[[int], int | None]:
        """The driver's count of a process's device memory (raises gpu_memory.Unwatched)."""
        if self.nvml is None:
            self.nvml = gpu_memory.Nvml()
        return self.nvml.used_bytes

    def _replace_zygote(self) -> None:
        self.zygote.close()
        self.zygote = Zygote(child_environment(), self.sealed)

    def __enter__(self) -> "Harness":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def exercise(self, job: Job) -> tuple[str, LoadedExercise]:
        """The exercise's version (jobs.exercise_version) and its modules, loaded again when
        its files changed."""
        version = exercise_version(job.exercise_dir)
        key = (job.exercise_dir, job.checks, tuple(job.wrong_programs))
        cached = self.exercises.get(key)
        if cached is None or cached[0] != version:
            cached = (
                version,
                load_exercise(
                    job.exercise, job.exercise_dir, job.checks, tuple(job.wrong_programs)
                ),
            )
            self.exercises[key] = cached
        return cached

    def grade_job(self, job: Job) -> reports.Report:
        """The submission run against the exercise's checks in a student process of its own:
        its report (raises when the grader itself fails; the submission's failures are in it)."""
        started, started_at = time.perf_counter(), time.time()
        limits = Limits.from_dict(job.limits)
        device = torch.device(
            "cuda"
            if job.device == "auto" and torch.cuda.is_available()
            else ("cpu" if job.device == "auto" else job.device)
        )
        seed = job.seed if job.seed is not None else secrets.randbits(48)
        version, exercise = self.exercise(job)
        base = dict(
            exercise=job.exercise,
            status=reports.ReportStatus.GRADED,
            seed=seed,
            lang=job.lang,
            job_id=job.id,
            exercise_version=version,
            max_score=sum(s.points for s in exercise.checks),
            environment=environment(device),
        )
        try:
            source = submission.read(
                Path(job.submission).read_bytes(), job.filename, limits.submission_kb << 10
            )
        except submission.Unreadable as exc:
            unreadable = Diagnostic("import-error", {"error": {"en": exc.en, "es": exc.es}})
            return reports.Report(
                **base,
                score=0.0,
                checks=tuple(
                    self._not_run(spec, job.lang, [unreadable]) for spec in exercise.checks
                ),
                notes=(_load_error(unreadable, job.lang),),
                timing={"started_at": started_at, "total": time.perf_counter() - started},
            )
        # what the grade before left (its student's reap, a zygote it stopped), settled before
        # this submission's time starts: from here on, all is this grade's
        self.zygote.settle()
        if self.zygote.lost is not None:
            self._replace_zygote()
        self.zygote.wait_ready()
        budget = Budget(limits.budget_seconds)
        session = Session(
            self, BudgetedLimits(limits, budget), device, source, exercise, job.required_layers
        )
        try:
            blockers = session.load()
            if (
                session.unloaded is not None and session.unloaded.code == "timeout" and budget.spent
            ):  # the budget, not load_seconds, stopped the loading
                session.unloaded = session.fatal = budget.diagnostic(LOADING)
                blockers = [session.unloaded]
            found = [
                self._run_check(session, spec, seed, index, budget)
                for index, spec in enumerate(exercise.checks)
            ]
            # the second look's output, process and time are not the grade's, nor its budget
            output, processes, timing = session.output.text(), session.starts, dict(session.timing)
            session.close_process()
            # the second look's own time, each of its requests within it: one that began just
            # before the look's end ran on for its whole call time (a look of 20 s took 57 s)
            session.limits = BudgetedLimits(limits, Budget(second_look.SECONDS))
            results, advice = self._results(session, seed, job, found)
            session.close_process()  # here, not only in `finally`: its reap may find the stop
        except ZygoteLost as lost:
            if not lost.stopped:  # it died, or hangs: nothing says the submission did it
                raise
            return self._stopped_the_grader(job, base, exercise, started, started_at)
        finally:
            session.close_process()
        load = session.load_result or {}
        notes = (
            [_load_error(d, job.lang) for d in blockers]
            + list(source.notes)
            + [
                _cell_error(n)
                for n in _listed(load.get("notes"))[: reports.MAX_ITEMS]
                if isinstance(n, dict)
            ]
            + advice
        )
        return reports.Report(
            **base,
            score=sum(r.points for r in results),
            checks=tuple(results),
            notes=tuple(notes),
            output=output,
            sandbox={
                "layers": session.layers,
                "unavailable": session.missing_layers,
                "student_processes": processes,
            },
            timing={
                **timing,
                "second_look": session.timing.get("second_look", 0.0),
                "budget": limits.budget_seconds,
                "budget_spent": budget.spent,
                "started_at": started_at,
                "total": time.perf_counter() - started,
            },
        )

    def _stopped_the_grader(
        self, job: Job, base: dict, exercise: LoadedExercise, started: float, started_at: float
    ) -> reports.Report:
        """The zygote was found stopped while the submission's process ran: only a signal
        from it can have done that, so no check counts (where the kernel keeps a student from
        other processes' signals, this cannot happen)."""
        stopped = Diagnostic("forbidden-operation", {"what": YOUR_CODE, "error": STOPPED_GRADER})
        return reports.Report(
            **base,
            score=0.0,
            checks=tuple(self._not_run(spec, job.lang, [stopped]) for spec in exercise.checks),
            notes=(_load_error(stopped, job.lang),),
            timing={"started_at": started_at, "total": time.perf_counter() - started},
        )

    def _run_check(
        self, session: Session, spec: CheckSpec, seed: int, index: int, budget: Budget
    ) -> "Found":
        try:
            return self._run_check_once(session, spec, seed, index, budget)
        finally:
            self.zygote.check()  # a stop its process sent the zygote is its doing

    def _run_check_once(
        self, session: Session, spec: CheckSpec, seed: int, index: int, budget: Budget
    ) -> "Found":
        blockers = session.blockers(spec)
        if blockers:
            return Found(spec, blockers=blockers)
        if budget.spent:
            return Found(spec, [budget.diagnostic(spec.title)], budget_out=True)
        started = time.perf_counter()
        try:
            run_check(session, spec, seed, index, session.exercise.reference)
        except Fail as fail:
            diagnostics = fail.diagnostics
        except StudentError as exc:
            diagnostics = [diagnose_exception(exc.info, spec.title)]
        except StudentDied as died:
            if died.code != "timeout" or not budget.spent:
                session.after_death(died)
            diagnostics = [Diagnostic(died.code, dict(died.details, what=spec.title))]
        else:
            return Found(spec)
        if budget.spent and any(d.code == "timeout" for d in diagnostics):
            # stopped where the budget ended: its time, not this check's call_seconds
            return Found(
                spec,
                [budget.diagnostic(spec.title)],
                time.perf_counter() - started,
                budget_out=True,
            )
        return Found(spec, diagnostics, time.perf_counter() - started)

    def _results(
        self, session: Session, seed: int, job: Job, found: list["Found"]
    ) -> tuple[list[reports.CheckOutcome], list[dict]]:
        """Each check's result: a mistake explained once, each failure given a second look;
        and the exercise's advice, not graded, as notes."""
        said = SaidOnce()
        passed = [
            (index, check.spec)
            for index, check in enumerate(found)
            if check.diagnostics is None and not check.blockers and not check.budget_out
        ]
        look = SecondLook(session, seed, job.wrong_programs, session.limits.budget, passed)
        results = []
        for index, check in enumerate(found):
            spec = check.spec
            if check.blockers:
                results.append(self._not_run(spec, job.lang, check.blockers))
            elif check.budget_out:  # nothing to explain once nor to look at again
                results.append(self._result(spec, job.lang, check.diagnostics))
            elif check.diagnostics is None:
                results.append(
                    reports.CheckOutcome(
                        spec.name,
                        spec.title.get(job.lang, spec.title["en"]),
                        spec.points,
                        spec.points,
                        True,
                        "ok",
                        titles=_titles(spec),
                    )
                )
            else:
                diagnostics = look.diagnostics(
                    index, spec, said.diagnostics(spec, check.diagnostics), check.seconds
                )
                results.append(self._result(spec, job.lang, diagnostics))
        advice = look.advice(len(found), job.lang)
        session.timing["second_look"] = look.spent
        return results, advice

    @staticmethod
    def _result(spec: CheckSpec, lang: str, diagnostics: list[Diagnostic]) -> reports.CheckOutcome:
        rendered = tuple(d.to_dict(lang) for d in diagnostics)
        return reports.CheckOutcome(
            spec.name,
            spec.title.get(lang, spec.title["en"]),
            0.0,
            spec.points,
            False,
            rendered[0]["message"] if rendered else "",
            rendered,
            _titles(spec),
        )

    @staticmethod
    def _not_run(spec: CheckSpec, lang: str, blockers: list[Diagnostic]) -> reports.CheckOutcome:
        """A check that could not run: no points, and no diagnostics of its own, since its
        reason is the submission's, said once in the report's notes (a "load-error")."""
        return reports.CheckOutcome(
            spec.name,
            spec.title.get(lang, spec.title["en"]),
            0.0,
            spec.points,
            False,
            blockers[0].text(lang)[0],
            (),
            _titles(spec),
        )


@dataclass(frozen=True)
class Found:
    """What the first run of a check found: passed (no diagnostics), failed, or not run."""

    spec: CheckSpec
    diagnostics: list[Diagnostic] | None = None
    seconds: float = 0.0
    blockers: list[Diagnostic] | None = None
    budget_out: bool = False  # stopped, or not run, because the submission's budget ran out


def _listed(value: object) -> list:
    return value if isinstance(value, list) else []


def _cell_error(note: dict) -> dict:
    """A notebook cell's exception as the student's process reported it: only the fields the
    result page shows, each of a type it can show and clipped (the reply is the student's)."""
    frames = note.get("frames")
    frames = [f for f in frames[-5:] if isinstance(f, dict)] if isinstance(frames, list) else []
    file, line = student_place(frames)
    return {
        "kind": "cell-error",
        "cell": reports.clip(note.get("cell", ""), 200),
        "type": reports.clip(note.get("type", "Exception"), 200),
        "message": reports.clip(note.get("message", ""), 500),
        "frames": [{"file": file, "line": line}] if file or line else [],
    }


def _load_error(diagnostic: Diagnostic, lang: str) -> dict:
    """Why no check (or no check of a function) could run, as a note of the whole report."""
    return {"kind": reports.LOAD_ERROR, **diagnostic.to_dict(lang)}


def _titles(spec: CheckSpec) -> dict[str, str]:
    return {other: spec.title.get(other, spec.title["en"]) for other in LANGUAGES}


def _warm_up_autograd() -> None:
    """The grader's own first backward imports ~500 modules; pay that before the first job."""
    x = torch.ones(2, requires_grad=True)
    (x * x).backward(gradient=torch.ones(2))
    torch.autograd.grad((x.sigmoid() * x).sum(), x)


def environment(device: torch.device) -> dict:
    return {
        **reports.host_environment(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
    }
