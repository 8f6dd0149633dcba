import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    model.fc = nn.Linear(model.fc.in_features, num_classes)
    model.requires_grad_(False)  # freezes the new head as well
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)
