"""The wire format between the trusted grader and the student process.

A message is a JSON header plus raw byte buffers (tensor data), framed with lengths. Nothing is
ever unpickled, and the reader bounds sizes and nesting so a hostile peer cannot exhaust the
grader. Values are encoded as a tree of plain JSON with tagged dictionaries for tensors, tuples,
dicts, non-finite floats, dtypes, devices and handles to objects that stay in the student process.

Grader → student, a tensor travels as its contiguous bytes. Student → grader, it travels as its
storage span: the bytes from its storage offset to the last element its strides reach, with its
shape and strides. The grader rebuilds it with `as_strided` over a fresh tensor made of those
bytes, and takes both its values and its layout from that rebuild: a reply that claims a layout
must send memory laid out that way that still holds the right values.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy
import torch

HEADER = struct.Struct("<II")
BUFFER_LENGTH = struct.Struct("<Q")
MAX_DEPTH = 24
MAX_NODES = 20_000
MAX_STRING = 100_000
MAX_JSON = 16 << 20
MAX_DIMS = 64
MAX_INT = 2**64
# where a tensor may be: what the grader can grade on
DEVICE_TYPES = ("cpu", "cuda")

DTYPES = {
    str(d).removeprefix("torch."): d
    for d in (
        torch.float16,
        torch.bfloat16,
        torch.float32,
        torch.float64,
        torch.complex64,
        torch.complex128,
        torch.uint8,
        torch.int8,
        torch.int16,
        torch.int32,
        torch.int64,
        torch.bool,
    )
}


class ProtocolError(Exception):
    """The peer sent something that is not a well-formed message within the limits."""


class MessageTooLarge(ProtocolError):
    """The peer's message, as received, is over the byte limit (a student process that keeps
    to the rules refuses to send one: student.ValueTooLarge)."""


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def frames(header: dict, buffers: list[bytes]) -> list[bytes]:
    """The parts of one message, to write one after the other without joining large buffers."""
    body = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
    parts = [HEADER.pack(len(body), len(buffers)), body]
    for buf in buffers:
        parts += [BUFFER_LENGTH.pack(len(buf)), buf]
    return parts


def pack(header: dict, buffers: list[bytes]) -> bytes:
    return b"".join(frames(header, buffers))


class Unpacker:
    """Incremental reader: feed bytes, get whole messages; refuses frames over `max_bytes`."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.data = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > self.max_bytes + MAX_JSON:
            raise MessageTooLarge(f"reply larger than {self.max_bytes} bytes")

    def message(self) -> tuple[dict, list[bytes]] | None:
        if len(self.data) < HEADER.size:
            return None
        json_len, n_buffers = HEADER.unpack_from(self.data)
        if json_len > MAX_JSON or n_buffers > MAX_NODES:
            raise ProtocolError("message header out of bounds")
        offset = HEADER.size + json_len
        buffers, total = [], json_len
        for _ in range(n_buffers):
            if len(self.data) < offset + BUFFER_LENGTH.size:
                return None
            (length,) = BUFFER_LENGTH.unpack_from(self.data, offset)
            total += length
            if total > self.max_bytes:
                raise MessageTooLarge(f"reply larger than {self.max_bytes} bytes")
            offset += BUFFER_LENGTH.size
            if len(self.data) < offset + length:
                return None
            buffers.append(bytes(self.data[offset : offset + length]))
            offset += length
        if len(self.data) < HEADER.size + json_len:
            return None
        try:
            header = json.loads(bytes(self.data[HEADER.size : HEADER.size + json_len]))
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"malformed header: {exc}") from None
        if not isinstance(header, dict):
            raise ProtocolError("header is not an object")
        del self.data[:offset]
        return header, buffers


# --- tensors as bytes ------------------------------------------------------------------------


def tensor_bytes(t: torch.Tensor) -> bytes:
    """Raw little-endian contents of a plain tensor, read without any Python-level override."""
    with torch._C.DisableTorchFunction():
        t = torch._C.TensorBase.detach(t).cpu().contiguous().resolve_conj().resolve_neg()
        if t.dtype == torch.bfloat16:
            t = t.view(torch.int16)
        return t.numpy().tobytes()


def span_elements(shape: list[int], strides: list[int]) -> int:
    """How many elements of storage a tensor of these shape and (non-negative) strides reaches,
    from its first element on: 0 for an empty tensor."""
    if any(n == 0 for n in shape):
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def span_bytes(t: torch.Tensor) -> bytes:
    """The raw little-endian bytes of `t`'s storage from its offset to the last element its
    strides reach (its storage span), read without any Python-level override."""
    with torch._C.DisableTorchFunction():
        base = torch._C.TensorBase.detach(t)
        span = span_elements(list(base.shape), list(base.stride()))
        flat = base.as_strided((span,), (1,), base.storage_offset())
        flat = flat.cpu().resolve_conj().resolve_neg().contiguous()
        if flat.dtype == torch.bfloat16:
            flat = flat.view(torch.int16)
        return flat.numpy().tobytes()


def _whole(value: Any, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << 62:
        raise ProtocolError(f"bad {what}: {str(value)[:40]}")
    return value


def tensor_from_span(buf: bytes, dtype_str: Any, shape: Any, strides: Any) -> torch.Tensor:
    """The tensor a reply describes, rebuilt in the grader: `as_strided` with the reply's shape
    and strides over a fresh tensor made of the span's bytes. Its strides, and so whether it is
    contiguous or channels-last, are the grader's reading of the memory it was sent."""
    dtype = DTYPES.get(dtype_str) if isinstance(dtype_str, str) else None
    if dtype is None:
        raise ProtocolError(f"unknown dtype {str(dtype_str)[:40]}")
    if (
        not isinstance(shape, list)
        or not isinstance(strides, list)
        or len(shape) > MAX_DIMS
        or len(strides) != len(shape)
    ):
        raise ProtocolError("a tensor's shape and strides must be two lists of the same length")
    shape = [_whole(n, "size") for n in shape]
    strides = [_whole(s, "stride") for s in strides]
    span = span_elements(shape, strides)
    if span * torch.empty((), dtype=dtype).element_size() != len(buf):
        raise ProtocolError("a tensor's bytes do not match the span of its shape and strides")
    storage_dtype = torch.int16 if dtype == torch.bfloat16 else dtype
    base = torch.empty(span, dtype=storage_dtype)
    if span:
        base.numpy().view(numpy.uint8)[:] = numpy.frombuffer(buf, numpy.uint8)
    if dtype == torch.bfloat16:
        base = base.view(torch.bfloat16)
    return base.as_strided(shape, strides, 0)


def parse_device(value: Any) -> torch.device:
    """A device named in a message: "cpu", "cuda" or "cuda:N", nothing else."""
    if not isinstance(value, str) or len(value) > 20:
        raise ProtocolError("a device must be named by a short string")
    try:
        device = torch.device(value)
    except (RuntimeError, ValueError):
        raise ProtocolError(f"unknown device {value!r}") from None
    if device.type not in DEVICE_TYPES:
        raise ProtocolError(f"unknown device {value!r}")
    return device


def tensor_from_bytes(buf: bytes, dtype_str: str, shape: list[int]) -> torch.Tensor:
    dtype = DTYPES.get(dtype_str)
    if dtype is None or not all(isinstance(n, int) and n >= 0 for n in shape):
        raise ProtocolError(f"bad tensor description {dtype_str} {shape}")
    numel = math.prod(shape)
    if numel * torch.empty((), dtype=dtype).element_size() != len(buf):
        raise ProtocolError("tensor byte count does not match its shape")
    storage_dtype = torch.int16 if dtype == torch.bfloat16 else dtype
    # A fresh tensor, not a view of the buffer: a student's in-place mistake then gets the same
    # error message from PyTorch here as on their own machine.
    t = torch.empty(shape, dtype=storage_dtype)
    if numel:
        t.numpy().reshape(-1).view(numpy.uint8)[:] = numpy.frombuffer(buf, numpy.uint8)
    return t.view(torch.bfloat16) if dtype == torch.bfloat16 else t


# --- value trees -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Handle:
    """An object that lives in the student process, referred to by number."""

    id: int
    type_name: str = ""


@dataclass
class Budget:
    nodes: int = MAX_NODES
    # bytes of the tensors a reply rebuilds in the grader: a stride of 0 makes a large tensor of
    # a few bytes of span, so the span's bound (the reply's size) is not theirs
    tensor_bytes: int = 1 << 62

    def spend(self, depth: int) -> None:
        self.nodes -= 1
        if self.nodes < 0:
            raise ProtocolError(f"value has more than {MAX_NODES} parts")
        if depth > MAX_DEPTH:
            raise ProtocolError(f"value nested deeper than {MAX_DEPTH} levels")

    def spend_tensor(self, shape: list[int], dtype: torch.dtype) -> None:
        self.tensor_bytes -= math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if self.tensor_bytes < 0:
            raise MessageTooLarge("the tensors of the reply are larger than the grader accepts")


@dataclass
class Encoder:
    """Grader → student encoding of call arguments (tensors travel as data, handles as ids)."""

    buffers: list[bytes] = field(default_factory=list)

    def encode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ProtocolError("argument nested too deeply")
        if value is None or isinstance(value, (bool, int, str)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else {"__float__": repr(value)}
        handle = value if isinstance(value, Handle) else getattr(value, "handle", None)
        if isinstance(handle, Handle):
            return {"__handle__": handle.id}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, torch.dtype):
            return {"__dtype__": dtype_name(value)}
        if isinstance(value, torch.device):
            return {"__device__": str(value)}
        if isinstance(value, tuple):
            return {"__tuple__": [self.encode(v, depth + 1) for v in value]}
        if isinstance(value, list):
            return [self.encode(v, depth + 1) for v in value]
        if isinstance(value, dict):
            return {
                "__dict__": [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()
                ]
            }
        if type(value).__module__ == "numpy" and hasattr(value, "dtype"):
            return dict(self.tensor(torch.from_numpy(value)), numpy=True)
        raise ProtocolError(f"cannot send a {type(value).__name__}")

    def tensor(self, t: torch.Tensor) -> dict:
        self.buffers.append(tensor_bytes(t))
        return {
            "__tensor__": len(self.buffers) - 1,
            "dtype": dtype_name(t.dtype),
            "shape": list(t.shape),
            "requires_grad": t.requires_grad,
            "device": t.device.type,
        }


def decode_plain(
    value: Any, buffers: list[bytes], on_tensor, on_handle, budget: Budget, depth: int = 0
) -> Any:
    """Walk an encoded tree; tensors and handles are built by the two callbacks."""
    budget.spend(depth)
    if type(value) is int and not -MAX_INT <= value <= MAX_INT:
        # beyond any tensor's integers, and a float's range: what arithmetic of the grader's
        # with it would raise on (`10**400 - 1.5`: OverflowError) is a value like any other
        return math.inf if value > 0 else -math.inf
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise ProtocolError("string too long")
        return value
    if isinstance(value, list):
        return [decode_plain(v, buffers, on_tensor, on_handle, budget, depth + 1) for v in value]
    if not isinstance(value, dict) or len(value) == 0:
        raise ProtocolError("unexpected value")
    if "__tensor__" in value:
        index = value["__tensor__"]
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(buffers):
            raise ProtocolError("bad tensor buffer index")
        return on_tensor(value, buffers[index])
    if "__handle__" in value:
        return on_handle(value)
    if "__tuple__" in value:
        return tuple(
            decode_plain(v, buffers, on_tensor, on_handle, budget, depth + 1)
            for v in _list(value["__tuple__"])
        )
    if "__dict__" in value:
        out = {}
        for pair in _list(value["__dict__"]):
            if not isinstance(pair, list) or len(pair) != 2:
                raise ProtocolError("bad dict entry")
            key = decode_plain(pair[0], buffers, on_tensor, on_handle, budget, depth + 1)
            if not isinstance(key, (str, int, float, bool, tuple)) and key is not None:
                raise ProtocolError("unhashable dict key")
            out[key] = decode_plain(pair[1], buffers, on_tensor, on_handle, budget, depth + 1)
        return out
    if "__float__" in value:
        if value["__float__"] not in ("nan", "inf", "-inf"):
            raise ProtocolError("bad non-finite float")
        return float(value["__float__"])
    if "__dtype__" in value:
        dtype = DTYPES.get(value["__dtype__"]) if isinstance(value["__dtype__"], str) else None
        if dtype is None:
            raise ProtocolError("unknown dtype")
        return dtype
    if "__device__" in value:
        return parse_device(value["__device__"])
    return on_handle(value)


def _list(value: Any) -> list:
    if not isinstance(value, list):
        raise ProtocolError("expected a list")
    return value
