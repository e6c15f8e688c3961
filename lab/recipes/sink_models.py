"""The models of lab/streaming.py: the guide's GPT trained on Bigram-Backcopy.

    OMP_NUM_THREADS=1 python -m lab.recipes.sink_models --commit-trained  # into data/trained/
    python -m lab.recipes.sink_models --commit-trained --dry-run  # what it would write

Plain softmax, learned sink logits (gpt-oss) and a sigmoid output gate (Qiu et al.
2025), from the same start on the same batches. Seed 0's are cached by
lab/model_cache.py for the suite's quick run, under a key made from this module and
what it imports (its recipe there: so lab/streaming.py's tables and figure can change
freely; lab.model_cache --commit-trained does not refresh these).
"""

import dataclasses
import sys
from pathlib import Path

import torch

from lab import model_cache
from snippets.core.model import GPT, GPTConfig
from snippets.layers.taming import TamedSpec
from snippets.pages.tasks import backcopy_chain, bigram_backcopy
from snippets.run.train import fit, make_optimizer

MODELS = {  # name -> the taming pieces of every layer (snippets.layers.taming.TamedSpec)
    "plain": {},
    "learned sinks": {"sinks": True},
    "output gate": {"gate": "elementwise"},
}
MAX_FACTOR = 16  # the models accept streams up to this many times W (RoPE has no table)


@dataclasses.dataclass(frozen=True)
class Setup:
    """Everything a run depends on besides the model's attention and the seed."""

    vocab_size: int = 32
    n_triggers: int = 4
    trigger_rate: float = 0.2
    sharpness: float = 3.0  # how peaked the bigram chain is
    context_length: int = 32  # W
    n_layer: int = 2
    n_head: int = 8
    n_embed: int = 64
    steps: int = 1500
    batch_size: int = 32
    lr: float = 1e-2
    warmup_steps: int = 50  # then a cosine to lr / 10
    weight_decay: float = 0.0  # decay would shrink the parked heads' unused values
    eval_batch: int = 64  # held-out windows for the attention on BOS
    streams: int = 8  # held-out streams read side by side
    stream_factor: int = 16  # each held-out stream is this many times W long

    def training(self) -> "Setup":
        """The fields training reads (the cache's key): the held-out sizes zeroed."""
        return dataclasses.replace(self, eval_batch=0, streams=0, stream_factor=0)


FULL = Setup()


def chain(setup: Setup, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return backcopy_chain(
        setup.vocab_size, setup.n_triggers, setup.trigger_rate, setup.sharpness, generator
    )


def build(setup: Setup, name: str) -> GPT:
    """RoPE in every layer; "plain" the plain causal layer, the others TamedAttention."""
    C, H, T = setup.n_embed, setup.n_head, setup.context_length
    where = {"position": "rope", "max_length": MAX_FACTOR * T}
    layer = TamedSpec(C, H, T, **where, **MODELS[name]) if MODELS[name] else None
    config = GPTConfig(
        vocab_size=setup.vocab_size, context_length=T, n_embed=C, n_head=H,
        n_layer=setup.n_layer, max_length=where["max_length"],
        position="none" if layer else "rope",  # RoPE: inside the layers
        layers=None if layer is None else (layer,) * setup.n_layer,
    )  # fmt: skip
    return GPT(config)


def train_one(setup: Setup, name: str, seed: int) -> GPT:
    """One model on Bigram-Backcopy windows of W tokens, each opening with BOS."""
    transitions = chain(setup, seed)
    torch.manual_seed(seed)  # the same start where the models agree
    model = build(setup, name)
    optimizer = make_optimizer(model, setup.lr, setup.weight_decay)
    generator = torch.Generator().manual_seed(seed)  # the same batches
    W = setup.context_length

    def windows():
        idx = bigram_backcopy(setup.batch_size, W + 1, transitions, setup.n_triggers, generator)
        return [(idx[:, :-1], idx[:, 1:])]

    schedule = (setup.lr, setup.lr / 10, setup.warmup_steps, setup.steps)
    for _ in fit(model, optimizer, windows, schedule, range(setup.steps), 1.0):
        pass
    return model.eval()


def cache_name(name: str, seed: int) -> str:
    return f"streaming-{name.replace(' ', '-')}-{seed}"


def cache_key(setup: Setup, name: str, seed: int) -> tuple:
    """What the cached model depends on besides its recipe's code (this module and what
    it imports: model_cache.RECIPES): the training fields, the model, the seed."""
    return (setup.training(), name, seed)


def cache_file(setup: Setup, name: str, seed: int) -> str:
    """The file name of this model in the cache (.cache/trained/ and data/trained/)."""
    return model_cache.file_name(cache_name(name, seed), cache_key(setup, name, seed))


def trained(setup: Setup, name: str, seed: int = 0, model: GPT | None = None) -> GPT:
    """train_one(setup, name, seed), trained once per version of the code (lab.model_cache);
    `model`: one just trained so, to be cached rather than trained again."""

    def train(_):
        return (model if model is not None else train_one(setup, name, seed)), []

    loaded, _ = model_cache._cached(
        cache_name(name, seed), cache_key(setup, name, seed), lambda _: build(setup, name), train
    )
    return loaded


def committed_runs() -> dict[str, tuple]:
    """The models data/trained/ holds: seed 0's (the quick run's), name -> cache key."""
    return {cache_name(name, 0): cache_key(FULL, name, 0) for name in MODELS}


def commit_trained() -> list[Path]:
    """Seed 0's three models into data/trained/, trained if needed, replacing older
    ones of the same model."""
    for name in MODELS:
        trained(FULL, name, 0)
    return model_cache.write_plan(model_cache.commit_plan(committed_runs()))


if __name__ == "__main__":
    raise SystemExit(
        model_cache.main(sys.argv[1:], commit_trained, committed_runs, "lab.recipes.sink_models")
    )
