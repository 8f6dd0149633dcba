def train_step(model, data, labels, optimizer):
    prediction = model(data)
    loss = (prediction - labels).sum()
    optimizer.step()  # from the second call on, changes the parameters this graph saved
    loss.backward()
    return loss.item()
