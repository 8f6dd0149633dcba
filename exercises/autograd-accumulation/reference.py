import torch


def train_accumulated(
    model, optimizer, batches: list[torch.Tensor], accumulation_steps: int
) -> torch.Tensor:
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return model.weight
