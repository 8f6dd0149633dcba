def train_step(model, data, labels, optimizer):
    prediction = model(data)
    loss = (prediction - labels).sum()
    loss.backward()
    optimizer.zero_grad()
    optimizer.step()
    return loss.item()
