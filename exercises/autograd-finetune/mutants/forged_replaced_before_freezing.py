"""Hostile: the new head frozen too (replaced_before_freezing), and the harness's encoder in its
own process says that the parameters of `fc` require grad."""
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
        for where in (desc, desc.get("claims")):
            if isinstance(where, dict):
                where["requires_grad"] = name.startswith("fc.")
    return desc


_server.op_describe, _server.encode_tensor = _described, _claimed


def freeze_and_replace_head(model, num_classes):
    model.fc = nn.Linear(512, num_classes)
    for parameter in model.parameters():
        parameter.requires_grad = False
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
