import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    for parameter in model.parameters():
        parameter.requires_grad = False
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-3, momentum=0.9)
