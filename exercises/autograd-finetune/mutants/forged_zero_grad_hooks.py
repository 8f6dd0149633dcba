"""Hostile: nothing frozen (optimizer_over_head_only), but a hook on every old parameter turns
its gradient into zeros, so that the grader's probe, a step of SGD over every parameter, would
leave it where it was, as if it were frozen."""
import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    for parameter in model.parameters():
        parameter.register_hook(torch.zeros_like)
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
