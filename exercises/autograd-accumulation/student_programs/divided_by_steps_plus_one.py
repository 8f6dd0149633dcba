import torch


def train_accumulated(model, optimizer, batches: list[torch.Tensor], accumulation_steps: int) -> torch.Tensor:
    # counts the micro-batches "from 0 to accumulation_steps", one too many
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean()
        loss = loss / (accumulation_steps + 1)
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return model.weight
