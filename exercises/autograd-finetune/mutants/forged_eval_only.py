"""Hostile: nothing frozen (eval_only), and the harness's describe() and encoder in its own
process say that only `fc` requires grad."""
import sys

import torch
from torch import nn

_server = sys.modules["worker.harness.student"].Server
_describe, _encode = _server.op_describe, _server.encode_tensor
_names = {}


def _described(self, header, buffers):
    obj = self.handles[header["handle"]]
    if isinstance(obj, nn.Module):
        _names.clear()
        _names.update({id(p): n for n, p in obj.named_parameters()})
    return _describe(self, header, buffers)


def _claimed(self, t):
    desc = _encode(self, t)
    name = _names.get(id(t))
    if name is not None:
        flag = name.startswith("fc.")
        for where in (desc, desc.get("claims")):
            if isinstance(where, dict):
                where["requires_grad"] = flag
    return desc


_server.op_describe, _server.encode_tensor = _described, _claimed


def freeze_and_replace_head(model, num_classes):
    model.eval()
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(trainable, lr=1e-2, momentum=0.9)
