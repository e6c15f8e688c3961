"""Training a small GPT on multi-query associative recall (MQAR), and scoring its recall.

The one MQAR recipe of the guide's experiments (lab/recipes/kv_heads_models.py: key/value
heads; lab/parts/beyond_softmax_recall.py: softmax, Gated DeltaNet and hybrid blocks), and
the one the trained-model cache (lab/model_cache.py) trains its MQAR models with.

The recipe, for 2 to 4 layers on one CPU thread: rows of snippets.pages.tasks.mqar with a
number of pairs drawn per row, so one model is trained once and scored at each number
of pairs; the loss only on keys seen before in the row (a first occurrence's value is
a coin toss, nothing to learn); ALiBi positions, for the previous-token head MQAR
needs; AdamW at 3e-3 with a warm-up and a cosine decay; batches of 256 rows; no
curriculum (snippets.pages.tasks.mqar's in_order is not used).

Recall at N pairs: on fresh rows with exactly N distinct keys, the share of
repeated keys whose value is the model's top guess.
"""

import dataclasses

import torch

from snippets.core.attention import CausalSpec
from snippets.core.model import GPT, GPTConfig
from snippets.layers.configurable import AttentionSpec
from snippets.layers.linear_layers import LinearSpec
from snippets.layers.mla import MLASpec
from snippets.pages.tasks import IGNORE, mqar
from snippets.run.train import fit


@dataclasses.dataclass(frozen=True)
class MqarRun:
    """One trained model: the task, the model's sizes, its attention, the recipe.

    attention: {} for MHA, {"n_kv_head": G} for GQA/MQA, {"kv_latent": R} for MLA
    (its latent normalised unless "latent_norm": False), as a tuple of items, so
    that the run is hashable. layer_types: which blocks are "softmax" and which
    "linear" (Gated DeltaNet), and linear_state the (heads, D) of the linear
    blocks' state; None: every block softmax attention. layer_specs() turns
    them into the GPT's layers.
    """

    attention: tuple = ()
    seed: int = 0
    length: int = 32  # tokens in a row: 16 pairs
    n_keys: int = 32
    n_values: int = 64
    min_pairs: int = 1
    max_pairs: int = 12
    n_embed: int = 32  # C
    n_head: int = 8  # H: D = C / H = 4
    n_layer: int = 2
    steps: int = 600
    batch: int = 256
    lr: float = 3e-3
    warmup: int = 100
    layer_types: tuple[str, ...] | None = None
    linear_state: tuple[int, int] | None = None

    def layer_specs(self) -> tuple:
        """Every block's layer: the softmax blocks with ALiBi (for the
        previous-token head MQAR needs), the linear ones in chunks of 16
        positions (the same function as the default 64, tests/snippets/
        test_linear_attention.py, and at T = 32 not padded to twice its length)."""
        C, H, T, D = self.n_embed, self.n_head, self.length, self.n_embed // self.n_head
        a = dict(self.attention)
        if "kv_latent" in a:  # no RoPE part: ALiBi is its position scheme
            norm = a.get("latent_norm", True)
            softmax = MLASpec(C, H, a["kv_latent"], D, 0, D, rope=None, latent_norm=norm,
                              proj_bias=True, alibi=True)  # fmt: skip
        elif "n_kv_head" in a:
            softmax = AttentionSpec(C, H, a["n_kv_head"], D, rope=None, out_bias=True,
                                    alibi=True)  # fmt: skip
        else:
            softmax = CausalSpec(C, H, T, position="alibi")
        heads, state = self.linear_state or (H, D)
        linear = LinearSpec(heads, C, state, state, chunk_size=16)  # Gated DeltaNet
        kinds = self.layer_types or ("softmax",) * self.n_layer
        return tuple(linear if kind == "linear" else softmax for kind in kinds)

    def model_config(self) -> GPTConfig:
        return GPTConfig(
            vocab_size=self.n_keys + self.n_values,
            context_length=self.length,
            n_embed=self.n_embed,
            n_head=self.n_head,
            n_layer=self.n_layer,
            position="none",  # ALiBi acts in the softmax layers
            layers=self.layer_specs(),
        )

    def recipe(self) -> dict:
        """The run's task, sizes and recipe, as a result file records them: every
        field but the attention and the seed, and the block fields only when set."""
        skip = {"attention", "seed"}
        skip |= {k for k in ("layer_types", "linear_state") if getattr(self, k) is None}
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in skip}


def build(run: MqarRun) -> GPT:
    """GPT(run.model_config())."""
    return GPT(run.model_config())


def repeated_keys(tokens: torch.Tensor) -> torch.Tensor:
    """(B, L) bool: True at the key positions whose key occurred earlier in the row,
    the positions where a value can be recalled."""
    keys = tokens[:, 0::2]  # (B, n)
    n = keys.size(1)
    earlier = torch.ones(n, n, dtype=torch.bool).tril(-1)  # slot j < slot i
    seen = ((keys.unsqueeze(2) == keys.unsqueeze(1)) & earlier).any(dim=2)  # (B, n)
    out = torch.zeros_like(tokens, dtype=torch.bool)
    out[:, 0::2] = seen
    return out


def train_mqar(run: MqarRun) -> tuple[GPT, list[float]]:
    """Train run's model; return it (in eval mode) and its loss every 50 steps."""
    torch.manual_seed(run.seed)
    model = build(run)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=run.lr, betas=(0.9, 0.98), weight_decay=0.0
    )
    rows = torch.Generator().manual_seed(run.seed)  # the same rows for every variant

    def batch():
        tokens, targets = mqar(
            run.batch, run.length, run.n_keys, run.n_values,
            run.min_pairs, run.max_pairs, rows,
        )  # fmt: skip
        return [(tokens, torch.where(repeated_keys(tokens), targets, IGNORE))]

    schedule = (run.lr, run.lr / 10, run.warmup, run.steps)  # a cosine to lr / 10
    losses = []
    for done, _, loss, _ in fit(model, optimizer, batch, schedule, range(run.steps), 1.0):
        if (done - 1) % 50 == 0 or done == run.steps:
            losses.append(round(loss, 4))
    return model.eval(), losses


@torch.no_grad()
def recall(model: GPT, run: MqarRun, pairs: int, rows: int) -> float:
    """The share of repeated keys answered right, on `rows` fresh rows of exactly
    `pairs` distinct keys (the same rows for every model)."""
    data = torch.Generator().manual_seed(10_000 + pairs)
    tokens, targets = mqar(rows, run.length, run.n_keys, run.n_values, pairs, pairs, data)
    logits, _ = model(tokens)
    asked = repeated_keys(tokens)
    return (logits.argmax(-1) == targets)[asked].float().mean().item()


# The beyond-softmax page's GPTs (lab/parts/beyond_softmax_recall.py): 4 blocks each, the
# same but for their token mixers. The hybrid is Qwen3-Next's pattern, three Gated
# DeltaNet blocks then one softmax block (3 : 1). A Gated DeltaNet block has the
# softmax block's heads and widths, LINEAR_STATE = (heads, D) = (8, 4): a state of
# 8 x 4 x 4 = 128 numbers whatever the length, where a softmax block's cache holds
# 2 x T x C numbers (2,048 at T = 32).
BLOCKS = {
    "softmax": ("softmax",) * 4,
    "linear": ("linear",) * 4,
    "hybrid": ("linear", "linear", "linear", "softmax"),  # Qwen3-Next's 3 : 1
}
LINEAR_STATE = (MqarRun.n_head, MqarRun.n_embed // MqarRun.n_head)
# Four blocks learn the lookup in 600 steps with batches of 256 rows. With 64, 4-block
# softmax GPTs stayed near 1 / pairs, in 600 steps and in 2,400, and neither another
# initialisation, learning rate or RoPE helped in 600 to 1,200 steps; 3 blocks learned
# with 64.
BLOCKS_BATCH = 256
BLOCKS_CACHED = tuple(BLOCKS)  # seed 0 of each is in lab/model_cache.py


def blocks_run(variant: str, seed: int = 0) -> MqarRun:
    """The full run of a variant of BLOCKS."""
    if variant not in BLOCKS:
        raise ValueError(f"variant ({variant!r}) must be one of {list(BLOCKS)}")
    types = BLOCKS[variant]
    return MqarRun(
        seed=seed,
        n_layer=len(types),
        batch=BLOCKS_BATCH,
        layer_types=types,
        linear_state=LINEAR_STATE if "linear" in types else None,
    )
