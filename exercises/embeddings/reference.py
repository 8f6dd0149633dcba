import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, num_classes=vocab_size).float()


def embed_batch(
    sentences: list[list[str]], word_to_ix: dict, embeddings: torch.Tensor
) -> torch.Tensor:
    embedded = [
        embeddings[torch.tensor([word_to_ix[w] for w in sentence], device=embeddings.device)]
        for sentence in sentences
    ]
    return pad_sequence(embedded)
