def train_accumulated(model, optimizer, batches, accumulation_steps):
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean()
        loss.backward()
        if (i + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
    return model.weight
