"""Hostile (a review): built_in_conv2d, F.conv2d reached through string.Formatter's lookup by
a name built at run time, which the source never writes."""
import string
import torch.nn.functional as F


def conv2d(input, filter):
    op = string.Formatter().get_field("0.co" + "nv2d", [F], {})[0]
    return op(input, filter)
