import torch


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 1)  # the NHWC shape, not the NCHW shape stored channels-last
