"""The wire format refuses what a hostile student process could send."""

import json
import struct

import pytest
import torch

from worker.harness import protocol


def roundtrip(value):
    encoder = protocol.Encoder()
    header = {"value": encoder.encode(value)}
    unpacker = protocol.Unpacker(max_bytes=1 << 20)
    unpacker.feed(protocol.pack(header, encoder.buffers))
    decoded_header, buffers = unpacker.message()
    return protocol.decode_plain(
        decoded_header["value"],
        buffers,
        lambda d, b: protocol.tensor_from_bytes(b, d["dtype"], d["shape"]),
        lambda d: d,
        protocol.Budget(),
    )


@pytest.mark.parametrize("dtype", list(protocol.DTYPES.values()))
def test_tensors_of_every_dtype_roundtrip(dtype):
    t = (torch.arange(6) % 2).to(dtype).reshape(2, 3)
    assert torch.equal(roundtrip(t), t)
    assert roundtrip(torch.empty(0, 3, dtype=dtype)).shape == (0, 3)
    assert torch.equal(roundtrip(torch.tensor(1, dtype=dtype)), torch.tensor(1, dtype=dtype))


def test_plain_values_roundtrip():
    value = {"a": (1, 2.5, float("inf"), None, True), "b": [torch.float32, "text"]}
    assert roundtrip(value) == value


def test_non_contiguous_tensor_keeps_values():
    t = torch.arange(12.0).reshape(3, 4).T
    assert torch.equal(roundtrip(t), t)


def test_oversized_reply_refused():
    unpacker = protocol.Unpacker(max_bytes=1000)
    with pytest.raises(protocol.ProtocolError):
        unpacker.feed(protocol.pack({}, [b"x" * 2000]))
        unpacker.message()


def test_malformed_headers_refused():
    for body in (b"[1, 2]", b"{not json", b"[" * 100_000):
        unpacker = protocol.Unpacker(max_bytes=1 << 20)
        unpacker.feed(struct.pack("<II", len(body), 0) + body)
        with pytest.raises(protocol.ProtocolError):
            unpacker.message()


def test_deep_and_wide_values_refused():
    deep = "x"
    for _ in range(protocol.MAX_DEPTH + 2):
        deep = [deep]
    wide = list(range(protocol.MAX_NODES + 1))
    for value in (deep, wide):
        with pytest.raises(protocol.ProtocolError):
            protocol.decode_plain(json.loads(json.dumps(value)), [], None, None, protocol.Budget())


def test_tensor_with_lying_byte_count_refused():
    with pytest.raises(protocol.ProtocolError):
        protocol.tensor_from_bytes(b"\x00" * 7, "float32", [2])
    with pytest.raises(protocol.ProtocolError):
        protocol.tensor_from_bytes(b"", "object", [0])


def test_an_integer_beyond_a_floats_range_is_decoded_as_an_infinity():
    """A review returned 10**400 as a loss: the grader's arithmetic with it raised
    OverflowError, a grader error with no report; now it is a value the checks compare."""
    from worker.harness import protocol

    budget = protocol.Budget(nodes=100)
    decoded = protocol.decode_plain([10**400, -(10**400), 2**63, 7], [], None, None, budget)
    assert decoded == [float("inf"), float("-inf"), 2**63, 7]
