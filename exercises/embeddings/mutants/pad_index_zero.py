import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence


def one_hot(indices: torch.Tensor, vocab_size: int) -> torch.Tensor:
    return F.one_hot(indices, num_classes=vocab_size).float()


def embed_batch(sentences, word_to_ix, embeddings):
    # pads the word indices with 0, the index of a real word, and only then looks them up
    indices = [torch.tensor([word_to_ix[w] for w in sentence], device=embeddings.device)
               for sentence in sentences]
    return embeddings[pad_sequence(indices, padding_value=0)]
