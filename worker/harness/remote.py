"""The grader's side of the student process: the process itself and the request proxy.

Checks talk to the student only through `Student`: put a tensor, call a function, read an
attribute, describe a tensor's graph or a module. Every reply is decoded defensively into plain
grader-side values (`RemoteTensor`, `RemoteObject`), and every wait has a deadline.
"""
from __future__ import annotations

import os
import selectors
import signal
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from . import protocol, sandbox
from .diagnostics import Diagnostic, Fail
from .jobs import Limits
from .launch import Zygote


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


@dataclass
class RemoteTensor:
    """A tensor the student returned: its value (copied to the grader's CPU) and metadata."""

    value: torch.Tensor
    meta: dict
    handle: protocol.Handle

    def __getattr__(self, name: str) -> Any:
        try:
            return self.meta[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> torch.dtype:
        return self.value.dtype


@dataclass(frozen=True)
class RemoteObject:
    """Anything else the student returned, kept in the student process."""

    handle: protocol.Handle
    type_name: str
    tensor_subclass: bool = False

    def __getattr__(self, name: str) -> Any:
        """A check that takes it for a tensor (its `.value`, `.shape`…) fails the submission,
        which sent something else (a tensor subclass, say): never the grader."""
        if name.startswith("_"):
            raise AttributeError(name)
        raise Fail(Diagnostic("output-mismatch", {
            "what": {"en": "a value your code gave back", "es": "un valor que devolvió tu código"},
            "got_type": self.type_name, "expected_type": "torch.Tensor"}))


@dataclass
class Output:
    """The student's stdout and stderr, capped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[:max(room, 0)]
        self.dropped += max(len(chunk) - max(room, 0), 0)

    @property
    def full(self) -> bool:
        return len(self.data) >= self.limit

    def text(self) -> str:
        text = self.data.decode("utf-8", "replace")
        return text + (f"\n[… {self.dropped} more bytes of output dropped]" if self.dropped else "")


class StudentProcess:
    """One forked, sandboxed student process and its three pipes."""

    def __init__(self, zygote: Zygote, confinement: sandbox.Confinement, limits: Limits,
                 output: Output):
        self.zygote, self.limits, self.output = zygote, limits, output
        self.pid, (self.req_fd, self.rep_fd, self.out_fd) = zygote.spawn(confinement, limits)
        self.unpacker = protocol.Unpacker(max_bytes=limits.reply_mb << 20)
        self.alive = True
        for fd in (self.req_fd, self.rep_fd, self.out_fd):
            os.set_blocking(fd, False)
        self.hello, _ = self.exchange(None, [], limits.call_seconds)

    def exchange(self, header: dict | None, buffers: list[bytes], timeout: float) -> tuple[dict, list[bytes]]:
        """Send one request (or none) and wait for the reply, draining output meanwhile."""
        if not self.alive:
            raise StudentDied("crashed", {"reason": "already stopped"})
        pending = memoryview(protocol.pack(header, buffers)) if header is not None else memoryview(b"")
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.rep_fd, selectors.EVENT_READ)
            selector.register(self.out_fd, selectors.EVENT_READ)
            if pending:
                selector.register(self.req_fd, selectors.EVENT_WRITE)
            while True:
                message = self._message()
                if message is not None:
                    return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    self.stop()
                    raise StudentDied("timeout", {"seconds": timeout})
                for key, _ in selector.select(remaining):
                    if key.fd == self.req_fd:
                        try:
                            pending = pending[os.write(self.req_fd, pending):]
                        except BrokenPipeError:
                            pending = memoryview(b"")
                        if not pending:
                            selector.unregister(self.req_fd)
                    elif not self._read(key.fd):
                        if key.fd == self.out_fd:
                            selector.unregister(self.out_fd)
                        else:
                            raise self._died()

    def _message(self) -> tuple[dict, list[bytes]] | None:
        try:
            return self.unpacker.message()
        except protocol.ProtocolError as exc:
            raise self._malformed(exc) from None

    def _malformed(self, exc: protocol.ProtocolError) -> StudentDied:
        self.stop()
        if isinstance(exc, protocol.ReplyTooLarge):
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
        self._drain_output()
        status = self.stop(grace=1.0)
        sig = status.get("signal")
        if sig in (signal.SIGXCPU, signal.SIGKILL) and not status.get("killed"):
            return StudentDied("timeout", {"signal": signal.Signals(sig).name, "cpu_limit": True})
        details = {"exit_code": status.get("exit_code")}
        if sig:
            details["signal"] = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else sig
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
        if not self.alive:
            return {}
        self.alive = False
        if grace == 0.0:
            for kill in (os.killpg, os.kill):
                try:
                    kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
        status = self.zygote.reap(self.pid, grace)
        self._drain_output()  # printed just before the end (or the kill): part of the report
        for fd in (self.req_fd, self.rep_fd, self.out_fd):
            os.close(fd)
        return status


TAGGED_FIELDS = ("value", "parameters", "param_groups")


class Student:
    """What checks use to talk to the submission. Replies become grader-side values."""

    def __init__(self, process: StudentProcess, device: torch.device):
        self.process, self.device = process, device

    def request(self, op: str, values: dict | None = None, **fields: Any) -> dict:
        encoder = protocol.Encoder()
        header = {"op": op, **fields}
        for key, value in (values or {}).items():
            header[key] = encoder.encode(value)
        limits = self.process.limits
        reply, buffers = self.process.exchange(
            header, encoder.buffers, limits.load_seconds if op == "load" else limits.call_seconds)
        if "error" in reply:
            raise StudentError(reply["error"] if isinstance(reply["error"], dict) else {})
        return self.decode(reply, buffers)

    def decode(self, reply: dict, buffers: list[bytes]) -> dict:
        def tensor(desc: dict, buf: bytes) -> RemoteTensor:
            value = protocol.tensor_from_bytes(buf, desc["dtype"], desc["shape"])
            return RemoteTensor(value, desc, protocol.Handle(int(desc["__handle__"])))

        def handle(desc: dict) -> Any:
            if "__device__" in desc:
                return str(desc["__device__"])
            h = protocol.Handle(int(desc["__handle__"]), str(desc.get("type", "")))
            return RemoteObject(h, h.type_name, bool(desc.get("tensor_subclass")))

        try:
            return {k: protocol.decode_plain(v, buffers, tensor, handle, protocol.Budget())
                    if k in TAGGED_FIELDS else v for k, v in reply.items()}
        except (protocol.ProtocolError, KeyError, TypeError, ValueError) as exc:
            self.process.stop()
            raise StudentDied("crashed", {"reason": f"malformed reply: {exc}"}) from None

    def put(self, value: Any) -> Any:
        """Send tensors (requires_grad kept) and get handles to them in the student process."""
        return self.request("put", {"value": value})["value"]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._call({"name": name}, args, kwargs)

    def new(self, support_name: str, *args: Any, **kwargs: Any) -> Any:
        """Build an object with the exercise's public support code (a model, an optimizer)."""
        return self._call({"support": support_name}, args, kwargs)

    def method(self, obj: RemoteTensor | RemoteObject, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._call({"handle": obj.handle.id, "method": method}, args, kwargs)

    def _call(self, target: dict, args: tuple, kwargs: dict) -> Any:
        return self.request("call", {"args": list(args), "kwargs": kwargs}, target=target)["value"]

    def attr(self, obj: RemoteTensor | RemoteObject, name: str) -> Any:
        return self.request("attr", handle=obj.handle.id, name=name)["value"]

    def describe(self, obj: RemoteTensor | RemoteObject) -> dict:
        return self.request("describe", handle=obj.handle.id)
