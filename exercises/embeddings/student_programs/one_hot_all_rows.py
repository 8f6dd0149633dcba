import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    out = torch.zeros(len(indices), vocab_size)
    out[:, indices] = 1
    return out


def embed_batch(sentences: list[list[str]], word_to_ix: dict, embeddings: torch.Tensor) -> torch.Tensor:
    vectors = [embeddings[torch.tensor([word_to_ix[w] for w in s])] for s in sentences]
    return pad_sequence(vectors)
