import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, num_classes=vocab_size)  # int64


def embed_batch(sentences, word_to_ix, embeddings):
    embedded = [embeddings[torch.tensor([word_to_ix[w] for w in sentence],
                                        device=embeddings.device)]
                for sentence in sentences]
    return pad_sequence(embedded)
