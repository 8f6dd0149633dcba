import torch


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.float().contiguous(memory_format=torch.channels_last)
