"""The student process: sandboxes itself, runs the submission, answers the grader's requests.

Everything here runs beside hostile code. It keeps references to torch's immutable C-level
descriptors taken before the submission runs, so a submission that monkeypatches `torch.Tensor`
or `torch.allclose` changes nothing this module reports; and since it only ever *answers*, a
submission that corrupts it can only send wrong answers, which the grader scores as such.
"""

from __future__ import annotations

import functools
import io
import os
import re
import signal
import sys
import types
import warnings
from typing import Any

import torch

from worker.harness import gpu_memory, protocol, sandbox, syscalls, watch

_TB = torch._C.TensorBase
_TB_ATTRS = _TB.__dict__
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)
_NO_TORCH_FUNCTION = torch._C.DisableTorchFunction
_TYPE_NAME = type.__dict__["__name__"]
_TYPE_MRO, _TYPE_FLAGS, _TYPE_DICT = (
    type.__dict__[n] for n in ("__mro__", "__flags__", "__dict__")
)
Py_TPFLAGS_HEAPTYPE = 1 << 9
MAX_MESSAGE = 2000
MAX_GRAPH_NODES = 64  # unless the grader asks for more (a search for what ran), up to
MAX_GRAPH_SEARCH = 1 << 14
# Errors autograd raises inside backward(), where the traceback shows only the backward() call.
# In anomaly mode (the grader asks for it when it looks again at a check that failed with one)
# autograd warns with the forward traceback of the operation whose saved tensors were involved.
BACKWARD_ERRORS = ("backward through the graph a second time", "modified by an inplace operation")
FRAME = re.compile(r'File "([^"\n]+)", line (\d{1,9}), in (\S{1,200})')


def _get(t: torch.Tensor, name: str) -> Any:
    return _TB_ATTRS[name].__get__(t)


class ValueTooLarge(MemoryError):
    """The value asked for is larger than the grader accepts; refused before copying it (the
    grader stops a reply over its limit whatever this process does: protocol.MessageTooLarge)."""


def _direct(job: Any) -> Any:
    return job()


class Server:
    """Answers the grader's requests. Sealed, it lives on the main thread's stack alone and runs
    the submission's code through `watch` on the student thread (watch.py); unsealed, it runs
    it here (tests of what the seal stops)."""

    # no attribute of an instance's own: a submission that reaches this object (unsealed,
    # through a frame above its function's) cannot shadow its methods
    __slots__ = (
        "req_fd",
        "rep_fd",
        "reply_bytes",
        "handles",
        "next_handle",
        "labels",
        "anomaly",
        "submission",
        "support",
        "graders_support",
        "buffers",
        "buffered",
        "watch",
        "on_student",
        "returned",
    )

    def __init__(
        self, req_fd: int, rep_fd: int, reply_bytes: int, watched: watch.Watch | None = None
    ):
        self.req_fd, self.rep_fd, self.reply_bytes = req_fd, rep_fd, reply_bytes
        self.watch = watched
        self.on_student = watched.run if watched is not None else _direct
        self.handles: dict[int, Any] = {}
        # what the submission's code returned, kept until a reset drops it on its own thread:
        # dropped here, an object's `__del__` would run on the main thread
        self.returned: list[Any] = []
        self.next_handle = 1
        self.labels: frozenset[str] = frozenset()
        self.anomaly = False
        self.submission = types.ModuleType("submission")
        # support.py twice: the module the submission imports, and the grader's own copy, out
        # of the submission's reach by name, from which ctx.student.new builds its objects
        self.support = types.ModuleType("exercise_support")
        self.graders_support = types.ModuleType("exercise_support")
        self.buffers: list[bytes] = []
        self.buffered = 0

    # --- transport ---------------------------------------------------------------------------

    def serve(self, hello: dict) -> None:
        # bound before the submission loads: its changes to modules or classes cannot reach them
        send, tainted = self.send, (self.watch.tainted if self.watch else None)
        refuse = self.watch.refuse if self.watch else None
        send(hello)
        unpacker = protocol.Unpacker(max_bytes=1 << 40)
        while True:
            message = unpacker.message()
            if message is None:
                chunk = os.read(self.req_fd, 1 << 20)
                if not chunk:
                    return
                unpacker.feed(chunk)
                continue
            header, buffers = message
            self.buffers, self.buffered = [], 0
            try:
                reply = getattr(self, "op_" + header["op"])(header, buffers)
            except BaseException as exc:  # the student's exceptions are answers, not failures
                self.buffers = []
                reply = {"error": describe_exception(exc, self.labels, frames=self.watch is None)}
            change = tainted() if tainted else None
            if change:
                refuse(self.rep_fd, change)
            else:
                send(reply)

    def send(self, reply: dict) -> None:
        for part in protocol.frames(reply, self.buffers):
            view = memoryview(part)
            while view:
                view = view[os.write(self.rep_fd, view) :]

    # --- operations --------------------------------------------------------------------------

    def op_load(self, header: dict, _buffers: list[bytes]) -> dict:
        if header.get("support"):
            sys.modules["exercise_support"] = self.support
            for module in (self.support, self.graders_support):
                exec(compile(header["support"], "exercise_support.py", "exec"), module.__dict__)
            if self.watch is not None:  # before the submission's code can change it
                self.watch.watch_also(
                    watch.support_entries(self.graders_support, header["support"])
                )
        self.submission.__file__ = "submission.py"
        sys.modules["submission"] = self.submission
        self.labels = frozenset(label for label, _ in header["cells"])
        _, loaded = self.on_student(
            functools.partial(
                load_cells,
                header["cells"],
                bool(header["notebook"]),
                list(header["functions"]),
                self.submission.__dict__,
                self.labels,
            )
        )
        return loaded

    def op_put(self, header: dict, buffers: list[bytes]) -> dict:
        return {"value": self.encode(self.decode(header["value"], buffers))}

    def op_call(self, header: dict, buffers: list[bytes]) -> dict:
        owner, name = self.resolve(header["target"])
        # the arguments go with the job alone: what the submission leaves in them is dropped on
        # its own thread
        done, value = self.on_student(
            functools.partial(
                call,
                owner,
                name,
                self.decode(header.get("args", []), buffers),
                self.decode(header.get("kwargs", {"__dict__": []}), buffers),
                self.anomaly,
                self.labels,
            )
        )
        self.returned.append(value)
        return {"value": self.encode(value)} if done else {"error": value}

    def op_anomaly(self, header: dict, _buffers: list[bytes]) -> dict:
        self.anomaly = bool(header["on"])
        torch.autograd.set_detect_anomaly(self.anomaly, check_nan=False)
        return {}

    def op_attr(self, header: dict, _buffers: list[bytes]) -> dict:
        obj = self.handles[header["handle"]]
        if type(obj) in _PLAIN_TENSORS and header["name"] in _TB_ATTRS:
            return {"value": self.encode(_get(obj, header["name"]))}
        done, value = self.on_student(
            functools.partial(call, obj, header["name"], None, None, False, self.labels)
        )
        self.returned.append(value)
        return {"value": self.encode(value)} if done else {"error": value}

    def op_describe(self, header: dict, _buffers: list[bytes]) -> dict:
        obj = self.handles[header["handle"]]
        if type(obj) in _PLAIN_TENSORS:
            nodes = header.get("nodes")
            limit = min(nodes, MAX_GRAPH_SEARCH) if type(nodes) is int else MAX_GRAPH_NODES
            return {"graph": self.graph(_get(obj, "grad_fn"), limit)}
        done, value = self.on_student(functools.partial(describe_object, obj, self.labels))
        self.returned.append(value)
        if not done:
            return {"error": value}
        return {
            key: self.encode(part) if key in ("parameters", "param_groups") else part
            for key, part in value.items()
        }

    def op_reset(self, _header: dict, _buffers: list[bytes]) -> dict:
        # the objects go on the student's thread: their finalizers are the submission's code
        dropped, self.handles, self.returned = [self.handles, self.returned], {}, []
        self.on_student(dropped.clear)
        return {}

    # --- values ------------------------------------------------------------------------------

    def resolve(self, target: dict) -> tuple[Any, str | None]:
        """What a call is made on, and the attribute of it to call (None: itself). The
        submission's objects are read on its own thread (with `call`); the grader's support
        here, so that the grader's copy never reaches the submission's thread."""
        if "name" in target:
            return self.submission, str(target["name"])
        if "support" in target:
            return getattr(self.graders_support, target["support"]), None
        return self.handles[target["handle"]], str(target["method"])

    def decode(self, value: Any, buffers: list[bytes]) -> Any:
        def tensor(desc: dict, buf: bytes) -> Any:
            t = protocol.tensor_from_bytes(buf, desc["dtype"], desc["shape"])
            if desc.get("numpy"):
                return t.numpy()
            t = t.to(desc.get("device", "cpu"))
            return t.requires_grad_(bool(desc.get("requires_grad")))

        return protocol.decode_plain(
            value,
            buffers,
            tensor,
            lambda desc: self.handles[desc["__handle__"]],
            protocol.Budget(nodes=1 << 30),
        )

    def keep(self, obj: Any) -> int:
        handle = self.next_handle
        self.next_handle += 1
        self.handles[handle] = obj
        return handle

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > protocol.MAX_DEPTH:
            raise ValueError(f"the value is nested deeper than {protocol.MAX_DEPTH} levels")
        # by identity and C-level look-ups alone: a class of the submission's (a metaclass's
        # `__eq__` or `__name__`, a `__class__` property) runs no code here
        kind = type(value)
        if value is None or kind is bool or kind is int or kind is str:
            return value
        if issubclass(kind, float):
            value = float.__float__(value)
            return (
                value
                if value == value and abs(value) != float("inf")
                else {"__float__": repr(value)}
            )
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            return self.encode_tensor(value)
        if kind is tuple or kind is torch.Size:
            return {"__tuple__": [self.encode(v, depth + 1) for v in value]}
        if kind is list:
            return [self.encode(v, depth + 1) for v in value]
        if kind is dict:
            return {
                "__dict__": [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()
                ]
            }
        if kind is torch.dtype:
            return {"__dtype__": protocol.dtype_name(value)}
        if kind is torch.device:
            return {"__device__": str(value)}
        return {
            "__handle__": self.keep(value),
            "type": _TYPE_NAME.__get__(kind)[:200],
            "tensor_subclass": issubclass(kind, torch.Tensor),
        }

    def encode_tensor(self, t: torch.Tensor) -> dict:
        """A tensor as its storage span (from its storage offset to the last element its strides
        reach) with its shape and strides: the grader rebuilds it from them and reads its values
        and its layout there. What this process says about the tensor beyond that (its autograd
        flags, its version) goes under `claims`: the grader may choose its words with them, never
        a point."""
        with _NO_TORCH_FUNCTION():
            shape, strides = list(_get(t, "shape")), list(_TB.stride(t))
            span = protocol.span_elements(shape, strides)
            self.buffered += span * _TB.element_size(t)
            if self.buffered > self.reply_bytes:
                raise ValueTooLarge(
                    f"the value returned is larger than {self.reply_bytes >> 20} MiB"
                )
            self.buffers.append(protocol.span_bytes(t))
            grad_fn = _get(t, "grad_fn")
            return {
                "__tensor__": len(self.buffers) - 1,
                "__handle__": self.keep(t),
                "dtype": protocol.dtype_name(_get(t, "dtype")),
                "shape": shape,
                "strides": strides,
                "device": str(_get(t, "device")),
                "claims": {
                    "parameter": type(t) is torch.nn.Parameter,
                    "requires_grad": bool(_get(t, "requires_grad")),
                    "is_leaf": bool(_get(t, "is_leaf")),
                    "grad_fn": type(grad_fn).__name__[:200] if grad_fn is not None else None,
                    # Reading .grad of a non-leaf warns into the student's output; a version
                    # counter does not exist for inference tensors.
                    "has_grad": bool(
                        (_get(t, "is_leaf") or _get(t, "retains_grad"))
                        and _get(t, "grad") is not None
                    ),
                    "version": None if _TB.is_inference(t) else int(_get(t, "_version")),
                },
            }

    def graph(self, root: Any, limit: int) -> list[dict]:
        """The grad_fn graph breadth-first, as class names and edges between node indices, up
        to `limit` nodes; `python`: a node of a class made in Python (a custom Function's)."""
        nodes, index, queue = [], {}, [root] if root is not None else []
        while queue and len(nodes) < limit:
            fn = queue.pop(0)
            if id(fn) in index:
                continue
            index[id(fn)] = len(nodes)
            nexts = [f for f, _ in _next_functions(fn) if f is not None]
            nodes.append(
                {
                    "name": _TYPE_NAME.__get__(type(fn)),
                    "next": nexts,
                    "python": bool(_TYPE_FLAGS.__get__(type(fn)) & Py_TPFLAGS_HEAPTYPE),
                }
            )
            queue.extend(nexts)
        for node in nodes:
            node["next"] = [index[id(f)] for f in node["next"] if id(f) in index]
        return nodes


def _next_functions(node: Any) -> tuple:
    """A graph node's `next_functions`, read from the first C-defined class of its type: the
    class of a custom Function's node is a Python class its author can give a property of that
    name, whose code would run here."""
    for kind in _TYPE_MRO.__get__(type(node)):
        if not _TYPE_FLAGS.__get__(kind) & Py_TPFLAGS_HEAPTYPE:
            found = _TYPE_DICT.__get__(kind).get("next_functions")
            if found is not None:
                return tuple(found.__get__(node, type(node)))
    return ()


def describe_exception(
    exc: BaseException, labels: frozenset[str], frames: bool = True, made_at: dict | None = None
) -> dict:
    """An exception as the grader reads it: its type, message and the submission's frames
    (`frames`: False on the sealed main thread, which reads no frame). Never raises: an
    exception of the submission's that its own code keeps from being read is said as such."""
    kind = _TYPE_NAME.__get__(type(exc))[:200]
    try:
        return _described(exc, kind, labels, frames, made_at)
    except BaseException:
        return {
            "type": kind,
            "message": "<the exception could not be read>",
            "frames": [],
            "made_at": None,
            "errno": None,
        }


def _described(
    exc: BaseException, kind: str, labels: frozenset[str], frames: bool, made_at: dict | None
) -> dict:
    found, tb = [], exc.__traceback__ if frames else None
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename in labels:
            found.append({"file": code.co_filename, "line": tb.tb_lineno, "function": code.co_name})
        tb = tb.tb_next
    if isinstance(exc, SyntaxError) and exc.filename in labels:
        found.append({"file": exc.filename, "line": exc.lineno or 0, "function": "<module>"})
    try:
        # a SyntaxError's str() adds "(file, line N)", which the frame says already; str.__str__
        # makes a plain str of one of the submission's own str classes
        text = exc.msg if isinstance(exc, SyntaxError) and exc.msg else str(exc)
        message = str.__str__(text)[:MAX_MESSAGE]
    except BaseException:
        message = "<the exception's message could not be printed>"
    number = getattr(exc, "errno", None) if isinstance(exc, OSError) else None
    return {
        "type": kind,
        "message": message,
        "frames": found[-5:],
        "made_at": made_at,
        "errno": number if type(number) is int else None,
    }


# --- the submission's code: run on the student thread when sealed, and given back as
# (done, value) or (False, the exception described there, where its frames can be read) ----------


def load_cells(
    cells: list, notebook: bool, functions: list[str], namespace: dict, labels: frozenset[str]
) -> tuple[bool, dict]:
    notes, error = [], None
    for label, code in cells:
        try:
            exec(compile(code, label, "exec"), namespace)
        except BaseException as exc:
            info = describe_exception(exc, labels)
            if not notebook:
                error = info
                break
            notes.append(dict(info, cell=label))
    defined = {name: callable(namespace.get(name)) for name in functions if name in namespace}
    return True, {"notes": notes, "import_error": error, "defined": defined}


def call(
    owner: Any,
    name: str | None,
    args: list | None,
    kwargs: dict | None,
    anomaly: bool,
    labels: frozenset[str],
) -> tuple[bool, Any]:
    """owner.name(*args, **kwargs), or owner(...) when name is None, or the attribute itself
    when args is None. In anomaly mode, a backward error says where its tensor was made."""
    made_at = None
    try:
        target = owner if name is None else getattr(owner, name)
        if args is None:
            return True, target
        if not anomaly:
            return True, target(*args, **kwargs)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                return True, target(*args, **kwargs)
            except RuntimeError as exc:
                if any(text in str(exc) for text in BACKWARD_ERRORS):
                    made_at = forward_line(caught, labels)
                raise
    except BaseException as exc:  # the student's exceptions are answers, not failures
        return False, describe_exception(exc, labels, made_at=made_at)


def forward_line(caught: list[warnings.WarningMessage], labels: frozenset[str]) -> dict | None:
    """The student's last line in the forward traceback anomaly mode warned with."""
    for warning in caught:
        text = str(warning.message)
        if "Traceback of forward call" in text:
            frames = [(f, int(n), fn) for f, n, fn in FRAME.findall(text) if f in labels]
            if frames:
                file, line, function = frames[-1]
                return {"file": file, "line": line, "function": function}
    return None


def describe_object(obj: Any, labels: frozenset[str]) -> tuple[bool, Any]:
    """A module's or optimizer's parts, read from their instance state with C-level look-ups:
    not through their methods, which an instance of the submission's can shadow
    (`model.named_parameters = …` listed what it liked)."""
    try:
        if isinstance(obj, torch.nn.Module):
            modules = _named_modules(obj)
            parameters, seen = {}, set()
            for prefix, module in modules:
                for name, value in dict.items(_state(module).get("_parameters", {})):
                    if value is not None and id(value) not in seen:
                        seen.add(id(value))
                        parameters[f"{prefix}.{name}" if prefix else name] = value
            return True, {
                "class": _TYPE_NAME.__get__(type(obj)),
                "training": _state(obj).get("training") is True,
                "parameters": parameters,
                "modules": [[n, _TYPE_NAME.__get__(type(m))] for n, m in modules],
            }
        if isinstance(obj, torch.optim.Optimizer):
            return True, {
                "class": _TYPE_NAME.__get__(type(obj)),
                "param_groups": [
                    {k: v for k, v in dict.items(g) if k != "params"}
                    for g in list.__iter__(_state(obj)["param_groups"])
                ],
            }
        return True, {"class": _TYPE_NAME.__get__(type(obj))}
    except BaseException as exc:
        return False, describe_exception(exc, labels)


def _state(obj: Any) -> dict:
    return object.__getattribute__(obj, "__dict__")


def _named_modules(root: Any) -> list[tuple[str, Any]]:
    """(name, module) from `root` down, as named_modules() lists them, read from `_modules`."""
    found, seen, pending = [], set(), [("", root)]
    while pending:
        prefix, module = pending.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        found.append((prefix, module))
        children = [
            (f"{prefix}.{name}" if prefix else name, child)
            for name, child in dict.items(_state(module).get("_modules", {}))
            if child is not None
        ]
        pending.extend(reversed(children))
    return found


def _unbuffered(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False),
        encoding="utf-8",
        errors="backslashreplace",
        write_through=True,
    )


def start_cuda() -> str:
    """ "ready", or why CUDA cannot start in this confined process. Said before the submission
    is loaded, so that a driver the sandbox stops is the grader's failure, never an exception
    charged to the student's code (and its start-up, about 0.6 s, is never a check's time)."""
    try:
        torch.zeros(1, device="cuda")
    except Exception as exc:  # RuntimeError from the driver, AssertionError from a CPU build
        return f"{type(exc).__name__}: {exc}"
    return "ready"


def run(
    req_fd: int,
    rep_fd: int,
    out_fd: int,
    confinement: sandbox.Confinement,
    threads: int,
    reply_bytes: int,
    prepared: tuple | None = None,
    pid_namespace: str | None = None,
) -> None:
    """Entry point of a freshly forked student process; never returns. `prepared`: what the
    seal's checks compare with, taken before the fork's confinement (watch.prepare);
    `pid_namespace`: why the zygote could not make it one, where it could not."""
    code = 0
    try:
        os.setsid()
        sandbox._libc.prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG=SIGKILL: die with the keeper
        # a KeyboardInterrupt the submission sends itself would land on the main thread, in the
        # middle of the hand-over to the student thread (a review's `os.kill(1, SIGINT)`)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        # unbuffered, as `python -u`: what the student prints reaches the grader even if the
        # process is killed next (a time-out), and nothing waits in a buffer at the end
        sys.stdout = sys.__stdout__ = _unbuffered(1)
        sys.stderr = sys.__stderr__ = _unbuffered(2)
        syscalls.close_all_but(req_fd, rep_fd)
        os.chdir(confinement.scratch)
        active, missing = sandbox.confine(confinement, pid_namespace)
        torch.set_num_threads(threads)
        hello = {"layers": active, "missing": missing}
        if confinement.device == "cuda":
            hello["cuda"] = start_cuda()
            if hello["cuda"] == "ready":
                hello["gpu_memory"] = gpu_memory.bound_allocator(confinement.gpu_memory_bytes)
        watched = None
        if confinement.sealed:  # last: nothing of the harness's set-up is refused
            try:
                watched = watch.seal_process(prepared or watch.prepare(), req_fd, rep_fd)
                active.append("seal")
            except OSError as exc:
                missing.append(f"seal: {exc.strerror or exc}")
        else:
            missing.append("seal: taken away by the grader")
        Server(req_fd, rep_fd, reply_bytes, watched).serve(hello)
    except BaseException:
        code = 70
    finally:
        os._exit(code)
