"""Hostile: `frozen_copy` switches tracking off for the caller's `x` (frozen_requires_grad_false),
and the harness's attr() in its own process answers True for `requires_grad` and `is_leaf`."""
import sys

import torch

_server = sys.modules["worker.harness.student"].Server
_attr = _server.op_attr


def _flags(self, header, buffers):
    if header.get("name") in ("requires_grad", "is_leaf"):
        return {"value": True}
    return _attr(self, header, buffers)


_server.op_attr = _flags


def frozen_copy(x):
    return x.requires_grad_(False)


def sgd_update_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None


def predict(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)
