import torch


def accuracy(outputs, labels):
    predicted = outputs.argmax(dim=1)
    return (predicted == labels).sum().item() / labels.numel()


def mae(output, target):
    return (output - target).abs().sum().item()  # the total, not the mean
