"""Hostile: `frozen_copy` copies (clone_detach), and the harness's encoder in its own process
reports one storage address for every tensor."""
import sys

import torch

_server = sys.modules["worker.harness.student"].Server
_encode = _server.encode_tensor


def _one_storage(self, t):
    desc = _encode(self, t)
    desc["storage"] = 1
    if isinstance(desc.get("claims"), dict):
        desc["claims"]["storage"] = 1
    return desc


_server.encode_tensor = _one_storage


def frozen_copy(x):
    return x.clone().detach()


def sgd_update_(w, lr):
    with torch.no_grad():
        w -= lr * w.grad
    w.grad = None


def predict(model, x):
    model.eval()
    with torch.no_grad():
        return model(x)
