import torch


def accuracy(outputs, labels):
    # torch.max(x, 1) returns (values, indices): [0] takes the values
    predicted = torch.max(outputs, 1)[0]
    return (predicted == labels).sum().item() / labels.numel()


def mae(output, target):
    return (output - target).abs().mean().item()
