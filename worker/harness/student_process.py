"""The grader's side of a student process: the forked, sandboxed process itself, its pipes and
its capped output. Every wait has a deadline; a process that dies says how (StudentDied).
What the grader asks of it goes through worker/harness/remote.py's `Student`.
"""

from __future__ import annotations

import os
import selectors
import shutil
import signal
import time
from dataclasses import dataclass, field

from worker.harness import gpu_memory, protocol, sandbox
from worker.harness.jobs import Limits
from worker.harness.launch import ANSWER_SECONDS, Zygote, ZygoteLost


class StudentError(Exception):
    """The student's code raised; `info` holds type, message, frames (from the student)."""

    def __init__(self, info: dict):
        super().__init__(info.get("message", ""))
        self.info = info


class StudentDied(Exception):
    """The student process is gone: `code` is timeout, memory-limit or crashed."""

    def __init__(self, code: str, details: dict):
        super().__init__(code)
        self.code, self.details = code, details


class NotStarted(Exception):
    """The student process ended before it said it was ready: nothing of the submission had
    been given to it, so the node or the grader failed (a student held ready that died just as
    it was handed over, an out-of-memory kill), never the submission."""


@dataclass
class Output:
    """The student's stdout and stderr, capped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[: max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    @property
    def full(self) -> bool:
        return len(self.data) >= self.limit

    def text(self) -> str:
        """At most `limit` characters, the note of what was dropped included (the report keeps
        no more than that of the output either)."""
        if not self.dropped:
            return self.data.decode("utf-8", "replace")
        note = f"\n[… {self.dropped} more bytes of output dropped]"
        return self.data.decode("utf-8", "replace")[: max(self.limit - len(note), 0)] + note


class StudentProcess:
    """One forked, sandboxed student process and its three pipes."""

    def __init__(
        self,
        zygote: Zygote,
        confinement: sandbox.Confinement,
        limits: Limits,
        output: Output,
        optimizers: bool = False,
    ):
        self.zygote, self.limits, self.output = zygote, limits, output
        spawned, fds = zygote.spawn(confinement, limits, optimizers)
        self.pid, (self.req_fd, self.rep_fd, self.out_fd) = spawned["pid"], fds[:3]
        # the root of its scratch where that is a bounded tmpfs, which only the student's and the
        # zygote's mount namespaces show at its path: the grader looks at it through this
        self.scratch_fd: int | None = fds[3] if len(fds) > 3 else None
        self.scratch = spawned.get("scratch") or {}
        self.unpacker = protocol.Unpacker(max_bytes=limits.reply_mb << 20)
        self.alive = True
        # its device memory, read until it is stopped (set once it is a CUDA submission's)
        self.gpu_watch: gpu_memory.Watch | None = None
        # whether a request since its load or last reset may have left objects in it
        self.holds_objects = False
        for fd in (self.req_fd, self.rep_fd, self.out_fd):
            os.set_blocking(fd, False)
        # its replies and output, read as they come; its requests' pipe, while one is written
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.rep_fd, selectors.EVENT_READ)
        self.selector.register(self.out_fd, selectors.EVENT_READ)
        try:  # its readiness is the grader's set-up, never the submission's time or budget
            self.hello, _ = self.exchange(None, [], ANSWER_SECONDS)
        except BaseException as exc:  # no session has it
            if self.alive:  # interrupted (a pilot's SIGTERM): ended here, its scratch with it
                try:
                    self.stop()
                except ZygoteLost:
                    pass
            if isinstance(exc, StudentDied):
                raise NotStarted(
                    f"the student process ended before it was ready: {exc.code} {exc.details}"
                ) from None
            raise

    def exchange(
        self, header: dict | None, buffers: list[bytes], timeout: float
    ) -> tuple[dict, list[bytes]]:
        """Send one request (or none) and wait for the reply, draining output meanwhile."""
        if not self.alive:
            raise StudentDied("crashed", {"reason": "already stopped"})
        pending = (
            memoryview(protocol.pack(header, buffers)) if header is not None else memoryview(b"")
        )
        deadline = time.monotonic() + timeout
        selector = self.selector
        if pending:
            selector.register(self.req_fd, selectors.EVENT_WRITE)
        try:
            while True:
                self._within_gpu_memory()
                message = self._message()
                if message is not None:
                    return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.stop()
                    self._within_gpu_memory()  # killed by its watch meanwhile: that first
                    raise StudentDied("timeout", {"seconds": timeout})
                for key, _ in selector.select(remaining):
                    if key.fd == self.req_fd:
                        try:
                            pending = pending[os.write(self.req_fd, pending) :]
                        except BrokenPipeError:
                            pending = memoryview(b"")
                        if not pending:
                            selector.unregister(self.req_fd)
                    elif not self._read(key.fd):
                        if key.fd == self.out_fd:
                            selector.unregister(self.out_fd)
                        else:
                            raise self._died()
        finally:
            if pending and self.alive:  # answered before it read the whole request
                selector.unregister(self.req_fd)

    def _within_gpu_memory(self) -> None:
        """Raises where the watch killed the process: past its limit (the submission's
        failure), or its count lost (the grader's: gpu_memory.Unwatched)."""
        watch = self.gpu_watch
        if watch is None or (watch.past is None and watch.lost is None):
            return
        self.stop()
        if watch.lost is not None:
            raise gpu_memory.Unwatched(f"gpu-memory: its count was lost: {watch.lost}")
        raise StudentDied(
            "memory-limit",
            {"gpu_memory_mb": self.limits.gpu_memory_mb, "gpu_used_mb": watch.past >> 20},
        )

    def _message(self) -> tuple[dict, list[bytes]] | None:
        try:
            return self.unpacker.message()
        except protocol.ProtocolError as exc:
            raise self._malformed(exc) from None

    def _malformed(self, exc: protocol.ProtocolError) -> StudentDied:
        self.stop()
        self._within_gpu_memory()
        if isinstance(exc, protocol.MessageTooLarge):
            return StudentDied("memory-limit", {"reply_limit_mb": self.limits.reply_mb})
        return StudentDied("crashed", {"reason": str(exc)})

    def _read(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return True
        if fd == self.out_fd:
            self.output.add(chunk)
        else:
            try:
                self.unpacker.feed(chunk)
            except protocol.ProtocolError as exc:
                raise self._malformed(exc) from None
        return bool(chunk)

    def _died(self) -> StudentDied:
        self._within_gpu_memory()
        self._drain_output()
        status = self.stop(grace=1.0)
        sig = status.get("signal")
        if sig in (signal.SIGXCPU, signal.SIGKILL) and not status.get("killed"):
            return StudentDied("timeout", {"signal": signal.Signals(sig).name, "cpu_limit": True})
        details = {"exit_code": status.get("exit_code")}
        if sig:
            details["signal"] = (
                signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
            )
        return StudentDied("crashed", details)

    def _drain_output(self) -> None:
        """What the student wrote that the grader has not read yet, up to the output's cap (a
        writer that never stops cannot hold the grader here)."""
        while not self.output.full:
            try:
                chunk = os.read(self.out_fd, 1 << 20)
            except OSError:
                return
            if not chunk:
                return
            self.output.add(chunk)

    def stop(self, grace: float = 0.0) -> dict:
        """Ended and reaped by the zygote: killed at once, its reap not waited for (an empty
        status), or given `grace` seconds to end, and its wait status. Raises ZygoteLost when
        the zygote cannot reap it (then it dies with the zygote, which is replaced)."""
        if not self.alive:
            return {}
        self.alive = False
        try:
            if self.gpu_watch is not None:
                self.gpu_watch.stop()  # before the reap frees its pid
        finally:
            status = self._end(grace)
        return status

    def _end(self, grace: float) -> dict:
        if grace == 0.0 or self.zygote.lost:
            for kill in (os.killpg, os.kill):
                try:
                    kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
        asked = False  # the zygote to reap it, which removes its scratch then
        try:
            if self.zygote.lost:
                return {}
            if grace == 0.0:
                self.zygote.end(self.pid, self.scratch.get("path"))
                asked = True
                return {}
            status = self.zygote.reap(self.pid, grace)
            asked = True
            return status
        finally:
            self._drain_output()  # printed just before the end (or the kill): part of the report
            self.selector.close()
            for fd in (self.req_fd, self.rep_fd, self.out_fd, self.scratch_fd):
                if fd is not None:
                    os.close(fd)
            if not asked and self.scratch.get("path"):  # the zygote is lost: it is removed here
                shutil.rmtree(self.scratch["path"], ignore_errors=True)
