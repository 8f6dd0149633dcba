import torch
from torch import nn


def freeze_and_replace_head(model: nn.Module, num_classes: int) -> nn.Module:
    for parameter in model.parameters():
        parameter.requires_grad = False
    model.fc = nn.Linear(model.fc.in_features, num_classes)  # new layers are trainable
    return model


def make_optimizer(model: nn.Module) -> torch.optim.Optimizer:
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(trainable, lr=1e-2, momentum=0.9)
