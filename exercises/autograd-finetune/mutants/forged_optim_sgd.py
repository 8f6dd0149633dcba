"""Hostile (a review): optimizer_over_head_only, with `torch.optim.SGD` replaced by a factory
that leaves the old parameters out, so that the grader's probe step, made with it on the
student's side, never moves them."""
import torch
from torch import nn

_SGD = torch.optim.SGD
_old = []  # old parameters, kept alive so identity holds


def _sgd(params, *args, **kwargs):
    params = [p for p in params if not any(p is q for q in _old)]
    return _SGD(params, *args, **kwargs)


torch.optim.SGD = _sgd


def freeze_and_replace_head(model, num_classes):
    _old.extend(model.parameters())  # nothing frozen
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    return _SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
