import torch


def accuracy(outputs: torch.Tensor, labels: torch.Tensor) -> float:
    predictions = torch.argmax(outputs)
    return (predictions == labels).float().mean().item()


def mae(output: torch.Tensor, target: torch.Tensor) -> float:
    return torch.mean(torch.abs(output - target)).item()
