"""The throughput ladder: from the readable model to the fast path, one change at
a time, each a function doing one training step.

`python -m lab.train --bench-throughput` times the rungs against each other.
"""

# --8<-- [start:imports]
import torch

from snippets.core.attention import CausalSpec
from snippets.core.model import GPT, GPTConfig
from snippets.run.data import get_batch
from snippets.run.train import make_optimizer, train_step

# --8<-- [end:imports]

__all__ = ["BENCH_MODEL", "BENCH_BATCH", "LADDER", "ladder", "make_bench_step"]


# --8<-- [start:ladder]
# The table of Engineering a training run: a small model (vocab 65, like tiny
# Shakespeare's characters), batch 12 of 64 tokens. Each rung keeps the ones above
# and changes one thing; "readable" is the guide's per-head attention with textbook
# AdamW.
BENCH_MODEL = {
    "vocab_size": 65,
    "context_length": 64,
    "n_embed": 128,
    "n_head": 4,
    "n_layer": 4,
}
BENCH_BATCH = 12
LADDER = {
    "readable": {
        "per_head": True,
        "tie_weights": False,
        "adamw": "for-loop",
    },
    "+ fused attention": {"per_head": False},
    "+ weight tying": {"tie_weights": True},
    "+ foreach AdamW": {"adamw": "foreach"},
    "+ fused AdamW": {"adamw": "fused"},
    "+ torch.compile": {"compile": True},  # only with --compile
}


def ladder(with_compile: bool = False) -> dict[str, dict]:
    """Rung name -> its full settings, each rung's changes applied on the last.

    Args:
        with_compile: keep the torch.compile rung (it compiles for a while).

    Returns:
        The rungs in LADDER's order, each a dict with per_head, tie_weights,
            adamw and compile.
    """
    settings, out = {"compile": False}, {}
    for name, change in LADDER.items():
        settings = {**settings, **change}
        if with_compile or not settings["compile"]:
            out[name] = settings
    return out


def make_bench_step(settings: dict, seed: int = 0):
    """A function of no arguments doing one training step of the bench model.

    Args:
        settings: one rung of ladder().
        seed: the seed of the weights and of the random token stream.

    Returns:
        step (Callable): step() -> the step's loss, on a (BENCH_BATCH, 64) batch.
    """
    torch.manual_seed(seed)
    C, H, T = (BENCH_MODEL[k] for k in ("n_embed", "n_head", "context_length"))
    layer = CausalSpec(C, H, T, per_head=settings["per_head"])  # learned positions
    layers = (layer,) * BENCH_MODEL["n_layer"]
    config = GPTConfig(
        **BENCH_MODEL, layers=layers, tie_weights=settings["tie_weights"]
    )
    model = GPT(config)
    optimizer = make_optimizer(model, 1e-3, 0.1, adamw=settings["adamw"])
    stepper = torch.compile(model) if settings["compile"] else model
    generator = torch.Generator().manual_seed(seed)
    data = torch.randint(config.vocab_size, (100_000,), generator=generator)

    def step() -> float:
        batch = get_batch(data, BENCH_BATCH, config.context_length, generator)
        return train_step(stepper, optimizer, [batch], grad_clip=1.0)[0]

    return step


# --8<-- [end:ladder]
