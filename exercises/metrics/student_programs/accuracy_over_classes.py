import torch


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> float:
    predictions = outputs.argmax(dim=1)
    correct = (predictions == labels).sum().item()
    return correct / outputs.shape[1]


def mae(output: torch.Tensor, target: torch.Tensor) -> float:
    return torch.mean(torch.abs(output - target)).item()
