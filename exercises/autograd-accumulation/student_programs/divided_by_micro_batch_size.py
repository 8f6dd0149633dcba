import torch


def train_accumulated(model, optimizer, batches: list[torch.Tensor], accumulation_steps: int) -> torch.Tensor:
    # divides by the size of the micro-batch instead of the number of micro-batches
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean()
        loss = loss / len(x)
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return model.weight
