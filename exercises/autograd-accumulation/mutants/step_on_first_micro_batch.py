def train_accumulated(model, optimizer, batches, accumulation_steps):
    for i, x in enumerate(batches):
        loss = ((model(x) - 2 * x) ** 2).mean() / accumulation_steps
        loss.backward()
        if i % accumulation_steps == 0:  # steps after micro-batches 0, k, 2k, ...: off by one
            optimizer.step()
            optimizer.zero_grad()
    return model.weight
