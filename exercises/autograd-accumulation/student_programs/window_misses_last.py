import torch


def train_accumulated(model, optimizer, batches: list[torch.Tensor], accumulation_steps: int) -> torch.Tensor:
    # windows by slicing, but the inner range stops one micro-batch short
    for start in range(0, len(batches), accumulation_steps):
        for x in batches[start:start + accumulation_steps - 1]:
            loss = ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
            loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model.weight
