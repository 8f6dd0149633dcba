"""Hostile (a review): optimizer_over_head_only, with a hook on each old parameter that drops
its gradient once accumulated, so that SGD (weight decay included) skips it."""
import torch
from torch import nn


def _drop(p):
    p.grad = None  # SGD skips a parameter whose .grad is None: weight decay never reaches it


def freeze_and_replace_head(model, num_classes):
    for parameter in model.parameters():  # nothing frozen
        parameter.register_post_accumulate_grad_hook(_drop)
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
