"""The grader's side of the student process: the request proxy.

Checks talk to the student only through `Student`: put a tensor, call a function, read an
attribute, describe a tensor's graph or a module. Every reply is decoded defensively into plain
grader-side values (`RemoteTensor`, `RemoteObject`); the process itself is
worker/harness/student_process.py's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

from worker.harness import protocol
from worker.harness.diagnostics import Diagnostic, Fail
from worker.harness.student_process import StudentDied, StudentError, StudentProcess

# What the student process says about a tensor beyond its bytes, shape, strides, dtype and device,
# and the types the grader accepts for it. A claim: it may choose a diagnostic's words, never earn
# a point (the process is the submission's, its harness code included).
CLAIMS = {
    "parameter": (bool,),
    "requires_grad": (bool,),
    "is_leaf": (bool,),
    "grad_fn": (str, type(None)),
    "has_grad": (bool,),
    "version": (int, type(None)),
}


@dataclass
class RemoteTensor:
    """A tensor the student returned, rebuilt in the grader from its storage span.

    `stored` is the rebuild (`as_strided` with the reply's shape and strides over a fresh CPU
    tensor made of the span's bytes), `value` its values as a contiguous CPU tensor. `meta` holds
    only what the grader read itself: dtype, shape, strides, contiguous, channels_last (from
    `stored`) and the device (validated). `claims` holds what the student's process said about
    the tensor (requires_grad, is_leaf, grad_fn, has_grad, version, parameter): words for a
    diagnostic, never a point."""

    value: torch.Tensor
    meta: dict
    handle: protocol.Handle
    stored: torch.Tensor | None = None
    claims: dict = field(default_factory=dict)

    @classmethod
    def rebuilt(cls, desc: dict, buf: bytes, budget: protocol.Budget) -> "RemoteTensor":
        """From a reply's tensor entry; a malformed one raises ProtocolError, and one larger
        than the budget left MessageTooLarge, before its values are copied."""
        handle = desc.get("__handle__")
        if not isinstance(handle, int) or isinstance(handle, bool) or handle <= 0:
            raise protocol.ProtocolError("a tensor without a valid handle")
        stored = protocol.tensor_from_span(
            buf, desc.get("dtype"), desc.get("shape"), desc.get("strides")
        )
        budget.spend_tensor(list(stored.shape), stored.dtype)
        device = protocol.parse_device(desc.get("device"))
        claims = desc.get("claims", {})
        if not isinstance(claims, dict):
            raise protocol.ProtocolError("a tensor's claims must be an object")
        claims = {
            k: claims[k] for k, types in CLAIMS.items() if k in claims and type(claims[k]) in types
        }
        channels_last = stored.dim() == 4 and stored.is_contiguous(
            memory_format=torch.channels_last
        )
        meta = {
            "dtype": protocol.dtype_name(stored.dtype),
            "shape": list(stored.shape),
            "device": str(device),
            "strides": list(stored.stride()),
            "contiguous": stored.is_contiguous(),
            "channels_last": channels_last,
        }
        return cls(
            stored.contiguous().clone() if stored.dim() else stored.clone(),
            meta,
            protocol.Handle(handle),
            stored,
            claims,
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
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

    @property
    def device(self) -> torch.device:
        return torch.device(self.meta["device"])


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
        raise Fail(
            Diagnostic(
                "output-mismatch",
                {
                    "what": {
                        "en": "a value your code gave back",
                        "es": "un valor que devolvió tu código",
                    },
                    "got_type": self.type_name,
                    "expected_type": "torch.Tensor",
                },
            )
        )


TAGGED_FIELDS = ("value", "parameters", "param_groups")
# what each operation's answer must hold
REPLY_FIELDS = {
    "put": ("value",),
    "call": ("value",),
    "attr": ("value",),
    "load": ("notes", "import_error", "defined"),
}


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise protocol.ProtocolError(what)


def _short_str(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= protocol.MAX_STRING


def _valid_graph(nodes: Any) -> None:
    _expect(isinstance(nodes, list) and len(nodes) <= protocol.MAX_NODES, "graph: not a list")
    for node in nodes:
        _expect(
            isinstance(node, dict)
            and _short_str(node.get("name"))
            and isinstance(node.get("next"), list)
            and all(type(i) is int and 0 <= i < len(nodes) for i in node["next"]),
            "graph: a node must have a name and the indices of its next nodes",
        )


def _valid_modules(modules: Any) -> None:
    _expect(
        isinstance(modules, list)
        and len(modules) <= protocol.MAX_NODES
        and all(isinstance(m, list) and len(m) == 2 and all(map(_short_str, m)) for m in modules),
        "modules: pairs of names expected",
    )


def _valid_error(info: Any) -> None:
    _expect(info is None or isinstance(info, dict), "import_error: an object expected")


# the plain (untagged) fields of replies, and how each is validated
PLAIN_FIELDS = {
    "graph": _valid_graph,
    "class": lambda v: _expect(_short_str(v), "class: a string expected"),
    "training": lambda v: _expect(type(v) is bool, "training: a bool expected"),
    "modules": _valid_modules,
    "notes": lambda v: _expect(
        isinstance(v, list) and all(isinstance(n, dict) for n in v),
        "notes: a list of objects expected",
    ),
    "import_error": _valid_error,
    "defined": lambda v: _expect(
        isinstance(v, dict) and all(_short_str(k) and type(b) is bool for k, b in v.items()),
        "defined: names to bools",
    ),
}


def _valid_parameters(parameters: Any) -> None:
    _expect(
        isinstance(parameters, dict)
        and len(parameters) <= protocol.MAX_NODES
        and all(_short_str(k) and isinstance(v, RemoteTensor) for k, v in parameters.items()),
        "parameters: names to tensors expected",
    )


def _valid_param_groups(groups: Any) -> None:
    _expect(
        isinstance(groups, list)
        and len(groups) <= protocol.MAX_NODES
        and all(isinstance(g, dict) and all(map(_short_str, g)) for g in groups),
        "param_groups: a list of objects expected",
    )


# what a describe() reply holds, by what it describes: a tensor its graph; anything else its
# class, a module also its mode, parameters and submodules (all of them or none)
MODULE_FIELDS = ("training", "parameters", "modules")


def _valid_description(reply: dict, tensor: bool, needs: tuple[str, ...]) -> None:
    for key, validate in (("parameters", _valid_parameters), ("param_groups", _valid_param_groups)):
        if key in reply:
            validate(reply[key])
    present = [k for k in MODULE_FIELDS if k in reply]
    wanted = ["graph" if tensor else "class", *needs, *(MODULE_FIELDS if present else ())]
    missing = list(dict.fromkeys(k for k in wanted if k not in reply))
    _expect(
        not missing,
        f"no {', '.join(missing)} in the description of {'a tensor' if tensor else 'an object'}",
    )


def _error_info(info: Any) -> dict:
    """The student's exception as the grader reads it: type and message as strings, frames as
    a list of objects (student_place validates each), the rest dropped or made plain."""
    if not isinstance(info, dict):
        return {}
    clean = {
        "type": str(info.get("type", "Exception"))[:200],
        "message": str(info.get("message", ""))[:2000],
    }
    if isinstance(info.get("frames"), list):
        clean["frames"] = [f for f in info["frames"][-5:] if isinstance(f, dict)]
    if isinstance(info.get("made_at"), dict):
        clean["made_at"] = info["made_at"]
    errno = info.get("errno")
    if type(errno) is int:
        clean["errno"] = errno
    return clean


class Student:
    """What checks use to talk to the submission. Replies become grader-side values."""

    def __init__(self, process: StudentProcess, device: torch.device):
        self.process, self.device = process, device

    def cpu_seconds(self) -> float:
        """The CPU time the student's process has used, all its threads together (ended ones
        too), read from its CPU clock outside it: nothing the process says of itself."""
        return time.clock_gettime(((~self.process.pid) << 3) | 2)  # CPUCLOCK_SCHED of the pid

    def request(
        self,
        op: str,
        values: dict | None = None,
        description: tuple[bool, tuple[str, ...]] | None = None,
        **fields: Any,
    ) -> dict:
        if op not in ("load", "anomaly", "reset"):
            self.process.holds_objects = True
        encoder = protocol.Encoder()
        header = {"op": op, **fields}
        for key, value in (values or {}).items():
            header[key] = encoder.encode(value)
        limits = self.process.limits
        reply, buffers = self.process.exchange(
            header, encoder.buffers, limits.load_seconds if op == "load" else limits.call_seconds
        )
        if "error" in reply:
            raise StudentError(_error_info(reply["error"]))
        return self.decode(reply, buffers, op, description)

    def decode(
        self,
        reply: dict,
        buffers: list[bytes],
        op: str = "",
        description: tuple[bool, tuple[str, ...]] | None = None,
    ) -> dict:
        """A reply as grader-side values, every field the grader reads validated: a malformed
        one is the submission's (its process died, "crashed", with the reason), never the
        grader's. `description`, for a describe() reply: whether a tensor is described, and
        the fields the grader needs besides those every description of its kind holds."""

        def handle(desc: dict) -> Any:
            number = desc.get("__handle__")
            if not isinstance(number, int) or isinstance(number, bool) or number <= 0:
                raise protocol.ProtocolError("an object without a valid handle")
            type_name = desc.get("type", "")
            if not isinstance(type_name, str):
                raise protocol.ProtocolError("an object's type must be a string")
            h = protocol.Handle(number, type_name[:200])
            return RemoteObject(h, h.type_name, desc.get("tensor_subclass") is True)

        try:
            missing = [k for k in REPLY_FIELDS.get(op, ()) if k not in reply]
            if missing:
                raise protocol.ProtocolError(f"no {', '.join(missing)} in the answer to {op}")
            budget = protocol.Budget(tensor_bytes=self.process.limits.reply_mb << 20)
            decoded = {
                k: protocol.decode_plain(
                    v,
                    buffers,
                    lambda desc, buf: RemoteTensor.rebuilt(desc, buf, budget),
                    handle,
                    budget,
                )
                if k in TAGGED_FIELDS
                else v
                for k, v in reply.items()
            }
            for key, validate in PLAIN_FIELDS.items():
                if key in decoded:
                    validate(decoded[key])
            if description is not None:
                _valid_description(decoded, *description)
            if op == "load":  # what the report shows of the student's errors, made plain
                decoded["notes"] = [
                    dict(_error_info(n), cell=str(n.get("cell", ""))[:200])
                    for n in decoded["notes"][:100]
                ]
                if decoded["import_error"] is not None:
                    decoded["import_error"] = _error_info(decoded["import_error"])
            return decoded
        except protocol.MessageTooLarge:
            self.process.stop()
            raise StudentDied(
                "memory-limit", {"reply_limit_mb": self.process.limits.reply_mb}
            ) from None
        except (protocol.ProtocolError, KeyError, TypeError, ValueError, RuntimeError) as exc:
            self.process.stop()
            raise StudentDied("crashed", {"reason": f"malformed reply: {str(exc)[:300]}"}) from None

    def reset(self) -> None:
        """Drop what earlier requests left in the process (on its own thread: their finalizers
        are the submission's code); no request where none can have left anything."""
        if self.process.holds_objects:
            self.request("reset")
            self.process.holds_objects = False

    def put(self, value: Any) -> Any:
        """Send tensors (requires_grad kept) and get handles to them in the student process."""
        return self.request("put", {"value": value})["value"]

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._call({"name": name}, args, kwargs)

    def new(self, support_name: str, *args: Any, **kwargs: Any) -> Any:
        """Build an object with the exercise's public support code (a model, an optimizer)."""
        return self._call({"support": support_name}, args, kwargs)

    def method(
        self, obj: RemoteTensor | RemoteObject, method: str, *args: Any, **kwargs: Any
    ) -> Any:
        return self._call({"handle": _handle_of(obj), "method": method}, args, kwargs)

    def _call(self, target: dict, args: tuple, kwargs: dict) -> Any:
        return self.request("call", {"args": list(args), "kwargs": kwargs}, target=target)["value"]

    def attr(self, obj: RemoteTensor | RemoteObject, name: str) -> Any:
        return self.request("attr", handle=_handle_of(obj), name=name)["value"]

    def describe(
        self, obj: RemoteTensor | RemoteObject, *needs: str, nodes: int | None = None
    ) -> dict:
        """What the student's process says `obj` is: a tensor's {"graph"}; anything else's
        {"class"}, a module's also {"training", "parameters" (names to tensors), "modules"}, an
        optimizer's also {"param_groups"}. `needs`: fields the grader knows the object has (a
        module it built itself: "parameters"). A reply without them, or with a field of the
        wrong type, is malformed: the process is stopped, "crashed". `nodes`: how many of a
        tensor's graph nodes at most (64 unless asked; the student's side caps it)."""
        extra = {} if nodes is None else {"nodes": nodes}
        return self.request(
            "describe",
            description=(isinstance(obj, RemoteTensor), needs),
            handle=_handle_of(obj),
            **extra,
        )


def _handle_of(obj: Any) -> int:
    """The student-side object a check asks about. A plain value where the check expected one
    (a reply that sent a number, say) fails the submission, never the grader."""
    if isinstance(obj, (RemoteTensor, RemoteObject)):
        return obj.handle.id
    raise Fail(
        Diagnostic(
            "output-mismatch",
            {
                "what": {
                    "en": "a value your code gave back",
                    "es": "un valor que devolvió tu código",
                },
                "got_type": type(obj).__name__,
                "expected_type": "torch.Tensor",
            },
        )
    )
