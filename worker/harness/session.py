"""One submission's student processes (a `Session`): started lazily, restarted after a death,
stopped for good after too many; what the grader and its second look both run checks in."""

from __future__ import annotations

import platform
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import torch

from worker.harness import gpu_memory, sandbox, seal
from worker.harness import report as reports
from worker.harness.checks import CheckSpec, student_place
from worker.harness.diagnostics import Diagnostic, Fail
from worker.harness.jobs import REQUIRED_LAYERS, Limits
from worker.harness.remote import Student
from worker.harness.student_process import Output, StudentDied, StudentError, StudentProcess

MAX_RESTARTS = 2
LOADING = {"en": "loading the submission", "es": "la carga de la entrega"}
# after MAX_RESTARTS + 1 deaths the checks left are not run: each says which checks stopped the
# student's code (the subject of the last death's message) and that it was not run (its hint)
DEATHS = MAX_RESTARTS + 1
EARLIER = {
    "en": f"{DEATHS} earlier checks",
    "es": f"la ejecución de {DEATHS} comprobaciones anteriores",
}
NOT_RUN = {
    "en": f"Your code failed in {DEATHS} checks, so the remaining ones, this one included, "
    "were not run: fix first what the earlier checks show.",
    "es": f"Tu código falló en {DEATHS} comprobaciones, así que las restantes, incluida "
    "esta, no se ejecutaron: corrige primero lo que muestran las anteriores.",
}


class SandboxIncomplete(RuntimeError):
    """A required sandbox layer could not be raised on this node: the grader fails, closed."""

    def __init__(self, absent: list[str], reasons: list[str]):
        super().__init__(
            f"required sandbox layers missing on {platform.node()}: "
            f"{', '.join(absent)} ({'; '.join(reasons) or 'no reason given'})"
        )


class CudaUnavailable(RuntimeError):
    """CUDA could not start in the confined student process: the grader fails, closed."""

    def __init__(self, answer: str | None):
        super().__init__(
            f"CUDA cannot start in a confined student process on {platform.node()}: "
            f"{answer or 'no answer'}"
        )


class Spawner(Protocol):
    """What starts a session's student processes: the harness, with its warm zygote."""

    scratch_root: str | None
    read_paths: tuple[str, ...]

    def spawn(
        self,
        confinement: sandbox.Confinement,
        limits: Limits,
        output: Output,
        optimizers: bool = False,
    ) -> StudentProcess: ...

    def gpu_memory_used(self) -> Callable[[int], int | None]: ...


class Session:
    """The student processes of one submission: started lazily, restarted after a death."""

    def __init__(
        self,
        harness: Spawner,
        limits: Limits,
        device: torch.device,
        source,
        exercise,
        required_layers: tuple[str, ...] = REQUIRED_LAYERS,
    ):
        self.harness, self.limits, self.device = harness, limits, device
        self.source, self.exercise = source, exercise
        self.required_layers = required_layers
        self.output = Output(limits.output_bytes)
        self.process: StudentProcess | None = None
        self.scratch: str | None = None
        self.starts = 0
        self.load_result: dict | None = None
        self.fatal: Diagnostic | None = None
        self.unloaded: Diagnostic | None = None  # why the file did not load, if it did not
        self.missing: dict[str, Diagnostic] = {}  # the checks' functions it does not define
        self.layers: list[str] = []
        self.missing_layers: list[str] = []
        self.timing = {"start": 0.0, "load": 0.0}

    def load(self) -> list[Diagnostic]:
        """Start the student's process and load the file: what keeps checks from running at all
        (the file did not load, or does not define a function they call), to be said once."""
        try:
            self.start()
        except Fail as fail:
            self.unloaded = fail.diagnostics[0]
            return [self.unloaded]
        defined = self.load_result.get("defined", {})
        self.missing = {
            name: Diagnostic("missing-function", {"name": name})
            for name in self.exercise.functions
            if not defined.get(name)
        }
        return list(self.missing.values())

    @property
    def scratch_path(self) -> Path | None:
        """Where the grader sees the scratch: through the descriptor of its tmpfs (which only
        the student's and the zygote's mount namespaces show at its path), or the folder."""
        if self.process is not None and self.process.alive and self.process.scratch_fd is not None:
            return Path(f"/proc/self/fd/{self.process.scratch_fd}")
        return Path(self.scratch) if self.scratch else None

    def blockers(self, spec: CheckSpec) -> list[Diagnostic]:
        """Why this check cannot run, as `load` found it; empty when it can."""
        if self.unloaded is not None:
            return [self.unloaded]
        return [self.missing[name] for name in spec.uses if name in self.missing]

    def student(self) -> Student:
        if self.fatal:
            raise Fail(self.fatal)
        if self.process is None or not self.process.alive:
            self.start()
        return Student(self.process, self.device)

    def start(self) -> None:
        self.close_process()
        self.starts += 1
        confinement = sandbox.Confinement(
            # where the zygote makes the student's own scratch, whose path it says
            scratch=self.harness.scratch_root or tempfile.gettempdir(),
            memory_bytes=self.limits.memory_mb << 20,
            cpu_seconds=self.limits.cpu_seconds,
            file_bytes=self.limits.file_mb << 20,
            open_files=256,
            device=self.device.type,
            read_paths=self.harness.read_paths,
            scratch_bytes=self.limits.scratch_mb << 20,
            threads=self.limits.threads,
            sealed=self.harness.sealed,
            gpu_memory_bytes=self.limits.gpu_memory_mb << 20,
        )
        try:
            started = time.perf_counter()
            self.process = self.harness.spawn(
                confinement, self.limits, self.output, self.exercise.steps_optimizers
            )
            scratch = self.process.scratch
            self.scratch = scratch.get("path")
            # said before the submission ran: the sandbox's own word, not the student's
            self.layers = self.process.hello.get("layers", []) + (
                [scratch["layer"]] if "layer" in scratch else []
            )
            self.missing_layers = self.process.hello.get("missing", []) + (
                [scratch["missing"]] if "missing" in scratch else []
            )
            required = self.required_layers
            if self.device.type == "cuda":
                if self.process.hello.get("cuda") != "ready":
                    self.close_process()
                    raise CudaUnavailable(self.process.hello.get("cuda"))
                self._watch_gpu_memory()
                required += ("gpu-memory",)  # on a shared device, whatever the job asks
            absent = sandbox.absent(required, self.layers)
            if absent:
                self.close_process()
                raise SandboxIncomplete(absent, self.missing_layers)
            loading = time.perf_counter()
            self.timing["start"] += loading - started
            reply = Student(self.process, self.device).request(
                "load",
                cells=[list(c) for c in self.source.cells],
                notebook=self.source.notebook,
                functions=self.exercise.functions,
                support=self.exercise.support_source,
            )
            self.timing["load"] += time.perf_counter() - loading
        except StudentDied as died:
            self.fatal = Diagnostic(died.code, dict(died.details, what=LOADING))
            raise Fail(self.fatal) from None
        except (
            StudentError
        ) as exc:  # the loader itself raised: the code broke it (replaced a builtin)
            self.fatal = _import_error(exc.info)
            raise Fail(self.fatal) from None
        if self.load_result is None:
            self.load_result = reply
        if reply.get("import_error"):
            self.fatal = _import_error(reply["import_error"])
            raise Fail(self.fatal)

    def _watch_gpu_memory(self) -> None:
        """The grader's watch over the process's device memory: a layer, or why it is missing."""
        limit = self.limits.gpu_memory_mb << 20
        try:
            self.process.gpu_watch = gpu_memory.watch(
                self.process.hello, self.process.pid, limit, self.harness.gpu_memory_used
            )
        except gpu_memory.Unwatched as exc:
            self.missing_layers.append(f"gpu-memory: {exc}")
            return
        self.layers.append(gpu_memory.layer(limit))

    def after_death(self, died: StudentDied) -> None:
        if self.starts > MAX_RESTARTS:
            self.fatal = Diagnostic(died.code, dict(died.details, what=EARLIER, hint=NOT_RUN))

    def close_process(self) -> None:
        if self.process is not None and self.process.alive:
            self.process.stop()
        self.scratch = None  # removed as the process ends (StudentProcess.stop)


def _import_error(info: dict) -> Diagnostic:
    """The student's exception that stopped the file loading, at its last line of theirs; a
    module it could not import is named in the hint."""
    file, line = student_place(info.get("frames"))
    refused = seal.refusal_words(str(info.get("type")), str(info.get("message")))
    if refused:
        return Diagnostic(
            "forbidden-operation",
            {
                "what": LOADING,
                "error": refused,
                "file": file,
                "line": line,
                "hint": seal.HINT,
                "sealed": True,
            },
        )
    error = f"{reports.clip(info.get('type'), 200)}: {reports.clip(info.get('message'), 500)}"
    details = {"error": error, "file": file, "line": line}
    missing = re.fullmatch(r"No module named '([\w.]+)'", str(info.get("message") or ""))
    if info.get("type") == "ModuleNotFoundError" and missing:
        details["hint"] = _missing_module_hint(missing[1].split(".")[0])
    return Diagnostic("import-error", details)


def _missing_module_hint(module: str) -> dict:
    if module == "support":  # the file the portal once gave, or its name in the statement
        return {
            "en": f"The exercise's support code is the module `exercise_support`: import "
            f"it as `import exercise_support` or `from exercise_support import …`, "
            f"not as `{module}`.",
            "es": f"El código de apoyo del ejercicio es el módulo `exercise_support`: "
            f"impórtalo con `import exercise_support` o `from exercise_support "
            f"import …`, no como `{module}`.",
        }
    return {
        "en": f"The course's environment has no module `{module}`: your file runs with "
        f"torch, numpy and the exercise's `exercise_support` only. Remove that "
        f"import, or what uses it.",
        "es": f"El entorno del curso no tiene el módulo `{module}`: tu archivo se ejecuta "
        f"solo con torch, numpy y el `exercise_support` del ejercicio. Quita ese "
        f"import, o lo que lo usa.",
    }
