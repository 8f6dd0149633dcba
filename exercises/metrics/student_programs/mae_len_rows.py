import torch


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> float:
    predictions = outputs.argmax(dim=1)
    return (predictions == labels).sum().item() / len(labels)


def mae(output: torch.Tensor, target: torch.Tensor) -> float:
    return (output - target).abs().sum().item() / len(output)
