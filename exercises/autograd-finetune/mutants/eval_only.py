import torch
from torch import nn


def freeze_and_replace_head(model, num_classes):
    model.eval()  # changes how dropout and batch norm behave; every parameter stays trainable
    model.fc = nn.Linear(512, num_classes)
    return model


def make_optimizer(model):
    trainable = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.SGD(trainable, lr=1e-2, momentum=0.9)
