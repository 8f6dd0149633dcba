import torch


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    # NHWC in memory, then back to the NCHW shape
    return x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 2, 1)
