import torch


def accuracy(outputs, labels):
    predicted = outputs.argmax(dim=0)
    return (predicted == labels).sum().item() / labels.numel()


def mae(output, target):
    return (output - target).abs().mean().item()
