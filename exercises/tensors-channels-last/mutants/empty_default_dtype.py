import torch


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty(x.shape, memory_format=torch.channels_last)  # float32, whatever x is
    out.copy_(x)
    return out
