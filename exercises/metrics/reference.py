import torch


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> float:
    predicted = outputs.argmax(dim=1)
    return (predicted == labels).sum().item() / labels.numel()


def mae(output: torch.Tensor, target: torch.Tensor) -> float:
    return (output - target).abs().mean().item()
