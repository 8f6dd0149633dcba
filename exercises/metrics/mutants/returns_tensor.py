import torch


def accuracy(outputs, labels):
    return (outputs.argmax(dim=1) == labels).float().mean()


def mae(output, target):
    return (output - target).abs().mean()
