import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    model.fc = nn.Linear(512, num_classes)  # nothing frozen: every parameter stays trainable
    return model


def make_optimizer(model):
    return torch.optim.SGD(model.fc.parameters(), lr=1e-2, momentum=0.9)  # steps the head alone
