"""Tiny GPTs and a recording PagedCache for the tests of snippets/run/paged.py and
snippets/run/serving.py."""

import dataclasses

import pytest
import torch

from snippets.core.model import GPT, GPTConfig
from snippets.layers.configurable import AttentionSpec
from snippets.run import serving
from snippets.run.paged import BlockPool, PagedCache

V, C, T = 24, 32, 32  # vocabulary, channels, context_length
SPEC = AttentionSpec(C, 4, 2, 8)  # GQA: 4 query heads, 2 key/value heads of 8, RoPE
# Every layer kind a paged cache holds: the teaching layer with each position scheme it can
# page, and AttentionSpec layers with grouped heads, a window, a chunk, QK-norm, sinks, ALiBi.
MODELS = {
    "learned": {},
    "rope": {"position": "rope"},
    "sinusoidal": {"position": "sinusoidal"},
    "none": {"position": "none"},
    "gqa rope": {"position": "none", "layers": (SPEC, SPEC)},
    "window": {
        "position": "none",
        "layers": (dataclasses.replace(SPEC, kind="window", size=5), SPEC),
    },
    "chunk": {"position": "none", "layers": (dataclasses.replace(SPEC, kind="chunk", size=8),) * 2},
    "qk_norm": {"position": "none", "layers": (dataclasses.replace(SPEC, qk_norm="head"),) * 2},
    "sinks": {"position": "none", "layers": (dataclasses.replace(SPEC, sinks=True),) * 2},
    "alibi spec": {
        "position": "none",
        "layers": (dataclasses.replace(SPEC, rope=None, alibi=True),) * 2,
    },
}


def make(changes: dict, seed: int = 0, sharp: bool = True) -> GPT:
    """A tiny GPT whose next token depends on the whole context: weights of std 0.3, not
    the initial 0.02 under which a wrong key read still gives nearly the same logits."""
    torch.manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=V, context_length=T, n_embed=C, n_head=4, **changes))
    if sharp:
        with torch.no_grad():
            for name, p in model.named_parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.3)
                elif "sinks" in name:
                    p.normal_(0.0, 1.0)
    return model.eval()


def ids(n: int, seed: int, V: int = V) -> list[int]:
    return torch.randint(V, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


class Recording(PagedCache):
    """A PagedCache that remembers itself and every step planned (for generate_batch's
    own cache, which it does not return)."""

    made: list["Recording"] = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.steps, self.joined, self.left, self.allocated = [], {}, {}, 0
        Recording.made.append(self)
        allocate = self.pool.allocate

        def counted():
            self.allocated += 1
            return allocate()

        self.pool.allocate = counted  # blocks taken from the pool over the run

    def add(self, seq, prompt=()):
        self.joined[seq] = len(self.steps)  # before this step
        return super().add(seq, prompt)

    def free(self, seq):
        self.left[seq] = len(self.steps)  # after this step
        return super().free(seq)

    def plan(self, chunks):
        # (sequence, new tokens, the position of the first)
        self.steps.append([(seq, len(new), len(self.tokens[seq])) for seq, new in chunks])
        return super().plan(chunks)


def pool_is_empty(pool: BlockPool) -> bool:
    return pool.refs == [0] * pool.n_blocks and sorted(pool.free) == list(range(pool.n_blocks))


@pytest.fixture
def recording(monkeypatch):
    """generate_batch's caches, as Recordings: the list fills as they are made."""
    Recording.made = []
    monkeypatch.setattr(serving, "PagedCache", Recording)
    return Recording.made
