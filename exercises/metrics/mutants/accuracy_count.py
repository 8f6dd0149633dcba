import torch


def accuracy(outputs, labels):
    return (outputs.argmax(dim=1) == labels).sum().item()  # how many rows, not which share


def mae(output, target):
    return (output - target).abs().mean().item()
