"""Hostile (a review): optimizer_over_head_only, with `model.parameters` shadowed on the instance
so that the grader's probe, an SGD over every parameter, steps the head alone."""
import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    model.fc = nn.Linear(512, num_classes)  # nothing frozen
    head = model.fc
    # instance attribute shadows nn.Module.parameters: the grader's step_all builds its SGD from it
    model.parameters = lambda recurse=True: iter(list(head.parameters()))
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
