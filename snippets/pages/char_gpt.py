"""The guide's GPT, briefly trained on the guide's text, and its attention weights.

Shape letters: B batch, T sequence length, L layers, H heads. The "See
attention" notebook draws what these models attend to; lab/model_cache.py keeps
the trained models in a cache, lab/see_attention.py exports the explorer's data.
"""

# --8<-- [start:imports]
import dataclasses

import torch

from snippets.core.model import GPT, GPTConfig
from snippets.run.corpus import guide_text
from snippets.run.data import get_batch
from snippets.run.tokenizer import CharTokenizer
from snippets.run.train import train_step

# --8<-- [end:imports]

__all__ = ["CharGPTConfig", "train_char_gpt", "gpt_attention"]


# --8<-- [start:char_gpt]
@dataclasses.dataclass(frozen=True)
class CharGPTConfig:
    """The guide's GPT, one token per character, briefly trained on its text."""

    context_length: int = 32
    n_embed: int = 64
    n_head: int = 4
    n_layer: int = 2
    batch_size: int = 16
    steps: int = 300
    lr: float = 3e-3
    seed: int = 0

    def gpt_config(self, vocab_size: int) -> GPTConfig:
        """The GPTConfig of this model, for a vocabulary of vocab_size."""
        return GPTConfig(
            vocab_size=vocab_size,
            context_length=self.context_length,
            n_embed=self.n_embed,
            n_head=self.n_head,
            n_layer=self.n_layer,
        )


def train_char_gpt(config: CharGPTConfig) -> tuple[GPT, list[float]]:
    """A GPT trained on guide_text(), one token per character; each step's loss.

    Args:
        config: the model and the run.

    Returns:
        The model in eval mode, and the loss at every step (config.steps floats).
    """
    text = guide_text()
    char = CharTokenizer.from_text(text)
    data = torch.tensor(char.encode(text), dtype=torch.long)
    torch.manual_seed(config.seed)  # the initial weights
    generator = torch.Generator().manual_seed(config.seed)  # the batches
    model = GPT(config.gpt_config(char.vocab_size))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
    losses = []
    for _ in range(config.steps):
        x, y = get_batch(data, config.batch_size, config.context_length, generator)
        loss, _ = train_step(model, optimizer, [(x, y)], grad_clip=0.0)  # no clip
        losses.append(loss)
    return model.eval(), losses


# --8<-- [end:char_gpt]


# --8<-- [start:gpt_attention]
@torch.no_grad()
def gpt_attention(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """The attention weights of every layer of a GPT on idx (B, T): (B, L, H, T, T).

    Args:
        model: a GPT whose layers all have weights (softmax attention).
        idx: token ids (B, T).

    Returns:
        Attention weights (B, L, H, T, T).
    """
    _, _, weights = model(idx, return_weights=True)  # L x (B, H, T, T)
    return torch.stack(weights, dim=1)  # (B, L, H, T, T)


# --8<-- [end:gpt_attention]
