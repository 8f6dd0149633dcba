"""What the grader runs in your process for the speed bonus of `conv2d`.

`baseline_conv2d` is PyTorch's own convolution: the bonus compares the time your `conv2d` takes
with the time this one takes on the same input, in the same process.
"""
import torch
from torch.nn.functional import conv2d as _builtin_conv2d  # bound before the submission loads


def baseline_conv2d(input: torch.Tensor, filter: torch.Tensor) -> torch.Tensor:
    return _builtin_conv2d(input, filter)
