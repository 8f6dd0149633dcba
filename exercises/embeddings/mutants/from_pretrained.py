import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, num_classes=vocab_size).float()


def embed_batch(sentences, word_to_ix, embeddings):
    layer = nn.Embedding.from_pretrained(embeddings)  # freeze=True: a new parameter, frozen
    embedded = [layer(torch.tensor([word_to_ix[w] for w in sentence], device=embeddings.device))
                for sentence in sentences]
    return pad_sequence(embedded)
