"""Hostile (a review): optimizer_over_head_only, with the grader's own probe `step_all`
replaced in the grader's copy of the support code, reached through a model method's
`__globals__`."""
import torch
from torch import nn

_old = []


def freeze_and_replace_head(model, num_classes):
    g = type(model).forward.__globals__   # the grader's copy of exercise_support
    if not g.get("_forged"):
        g["_forged"] = True
        real_train = g["train"]

        def step_all(model, images, labels, lr):   # the grader's probe: only fc may move
            real_train(model, torch.optim.SGD(model.fc.parameters(), lr=lr, weight_decay=0.1),
                       images, labels, 1)
        g["step_all"] = step_all
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
