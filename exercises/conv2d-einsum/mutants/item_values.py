import torch


def conv2d(input, filter):
    B, _, H, W = input.shape
    O, _, kh, kw = filter.shape
    out = torch.zeros(B, O, H - kh + 1, W - kw + 1, dtype=input.dtype, device=input.device)
    for b in range(B):
        for o in range(O):
            for y in range(H - kh + 1):
                for x in range(W - kw + 1):
                    window = input[b, :, y:y + kh, x:x + kw]
                    out[b, o, y, x] = torch.einsum("cij,cij->", window, filter[o]).item()
    return out
