"""Hostile: `predict` builds a graph (predict_without_no_grad), and the harness's encoder in its
own process says that no tensor requires grad or has a grad_fn."""
import sys

import torch

_server = sys.modules["worker.harness.student"].Server
_encode = _server.encode_tensor


def _untracked(self, t):
    desc = _encode(self, t)
    for where in (desc, desc.get("claims")):
        if isinstance(where, dict):
            where.update(requires_grad=False, grad_fn=None, is_leaf=True)
    return desc


_server.encode_tensor = _untracked


def frozen_copy(x):
    return x.detach()


def sgd_update_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None


def predict(model, x):
    model.eval()
    return model(x)
