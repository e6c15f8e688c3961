"""Context extension on the positions page: a RoPE model trained at T, run at 2T and 4T.

    python -m lab.context_extension           # the committed result (a few minutes)
    python -m lab.context_extension --quick   # tiny sizes, seconds: the suite's check

A two-layer attention-only model with RoPE (the guide's configurable layer) learns
induction on repeated segments (snippets.pages.induction.repeated_tokens) at length T,
segments up to T/2 long. At k*T the segments are up to k*T/2 long: the copy sits
further back than any distance seen in training, which is what a longer context
asks of a model. Each RoPE scaling rule (snippets/core/rope_scaling.py) is applied
without training, then after a short fine-tune at k*T. The loss is measured on the
second half of each row, where every token is predictable from the row itself.

What the literature predicts: unscaled RoPE degrades beyond T (Chen et al. 2023,
Peng et al. 2023); interpolation keeps the angles inside the trained range, and a
short fine-tune at the new length recovers most of the loss (Chen et al. 2023:
1000 steps for LLaMA; YaRN: fewer).
"""

import dataclasses
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from lab.shared import experiment
from lab.shared.experiment import progress
from lab.shared.paths import RESULTS_DIR
from snippets.core.rope_scaling import RopeSpec
from snippets.layers.configurable import AttentionSpec, ConfigurableAttention
from snippets.pages.induction import repeated_tokens
from snippets.run.train import fit

SCHEMA = "attention-guide/context-extension/1"
RESULT_FILE = RESULTS_DIR / "context-extension.json"
FIGURE = "context-extension-frequencies.svg"


@dataclasses.dataclass(frozen=True)
class Setup:
    T: int = 32  # training length
    vocab_size: int = 64  # >= the longest segment, 4T / 2
    n_embed: int = 64
    n_head: int = 4
    head_size: int = 16
    base: float = 10000.0
    steps: int = 600
    finetune_steps: int = 60
    batch_size: int = 32
    lr: float = 3e-3
    finetune_lr: float = 1e-3
    eval_rows: int = 256
    factors: tuple[int, ...] = (2, 4)
    seed: int = 0


FULL = Setup()
# The suite's check: half the length and width, 2x only; still learns induction.
QUICK = Setup(
    T=16,
    vocab_size=32,
    n_embed=32,
    n_head=2,
    steps=300,
    finetune_steps=10,
    eval_rows=64,
    factors=(2,),
)
RULES = ("unscaled", "linear", "dynamic", "yarn", "llama3")


class RopeModel(nn.Module):
    """Token embeddings, two pre-norm RoPE attention layers, an unembedding."""

    def __init__(self, s: Setup):
        super().__init__()
        self.emb = nn.Embedding(s.vocab_size, s.n_embed)
        spec = AttentionSpec(s.n_embed, s.n_head, s.n_head, s.head_size, rope=RopeSpec(base=s.base))
        self.layers = nn.ModuleList(ConfigurableAttention(spec) for _ in range(2))
        self.norms = nn.ModuleList(nn.LayerNorm(s.n_embed) for _ in range(3))
        self.head = nn.Linear(s.n_embed, s.vocab_size, bias=False)

    def set_rope(self, rope: RopeSpec) -> None:
        """Every layer turns with `rope` from now on (the weights stay)."""
        for layer in self.layers:
            layer.spec = dataclasses.replace(layer.spec, rope=rope)

    def forward(self, idx, targets=None):
        """(logits, the loss on targets or None), as the guide's GPT returns them."""
        x = self.emb(idx)
        for norm, layer in zip(self.norms[:-1], self.layers, strict=True):
            x = x + layer(norm(x))
        logits = self.head(self.norms[-1](x))
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))


def rope_for(rule: str, s: Setup, factor: int) -> RopeSpec:
    """The RopeSpec of a rule, to run at factor * T."""
    if rule == "unscaled":
        return RopeSpec(base=s.base)
    if rule == "dynamic":  # NTK-aware: the base grows with the length run
        return RopeSpec(base=s.base, scaling="dynamic", factor=1.0, original_length=s.T)
    return RopeSpec(base=s.base, scaling=rule, factor=float(factor), original_length=s.T)


def batch(s: Setup, length: int, n: int, generator) -> torch.Tensor:
    """Rows of length + 1 tokens; segments of length / 8 .. length / 2."""
    return repeated_tokens(n, length + 1, s.vocab_size, length // 8, length // 2, generator)


def second_half_loss(model, rows: torch.Tensor) -> torch.Tensor:
    """The loss on the second half of each row, where every token can be copied."""
    x, y = rows[:, :-1], rows[:, 1:]
    logits, _ = model(x)
    half = x.size(1) // 2
    logits, y = logits[:, half:], y[:, half:]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def train(model, s: Setup, length: int, steps: int, lr: float, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()

    def rows():
        idx = batch(s, length, s.batch_size, generator)
        return [(idx[:, :-1], idx[:, 1:])]

    # A constant rate (lr_at with min_lr = lr and no warm-up) and no clipping.
    for _ in fit(model, optimizer, rows, (lr, lr, 0, steps), range(steps), 0.0):
        pass
    model.eval()


@torch.no_grad()
def evaluate(model, s: Setup, length: int) -> float:
    generator = torch.Generator().manual_seed(s.seed + 1000 + length)  # same rows for all
    return round(second_half_loss(model, batch(s, length, s.eval_rows, generator)).item(), 4)


def run(s: Setup, header: dict) -> dict:
    torch.manual_seed(s.seed)
    model = RopeModel(s)
    progress(f"training at T={s.T} for {s.steps} steps")
    train(model, s, s.T, s.steps, s.lr, s.seed)
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    rows = [{"rule": "trained length", "factor": 1, "scaled": evaluate(model, s, s.T)}]
    for factor in s.factors:
        for rule in RULES:
            model.load_state_dict(trained)
            model.set_rope(rope_for(rule, s, factor))
            scaled = evaluate(model, s, factor * s.T)
            progress(f"{factor}x {rule}: fine-tuning {s.finetune_steps} steps")
            train(model, s, factor * s.T, s.finetune_steps, s.finetune_lr, s.seed + factor)
            rows.append(
                {
                    "rule": rule,
                    "factor": factor,
                    "scaled": scaled,
                    "finetuned": evaluate(model, s, factor * s.T),
                }
            )
            model.set_rope(rope_for("unscaled", s, 1))
    return {**header, "setup": dataclasses.asdict(s), "rows": rows}


def frequencies_figure(s: Setup = FULL, factor: int = 4):
    """theta_i of each rule against the pair index, at factor * T."""
    from lab.shared.style import FIGURE_WIDTH, pyplot
    from snippets.core.rope_scaling import frequencies

    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.4))
    for rule, marker in zip(RULES, "os^vD", strict=True):
        theta, _ = frequencies(rope_for(rule, s, factor), s.head_size, factor * s.T)
        ax.plot(range(theta.numel()), theta.numpy(), marker=marker, label=rule)
    ax.set_yscale("log")
    ax.set_xlabel("pair i")
    ax.set_ylabel("theta_i, radians per position")
    ax.set_title(f"D = {s.head_size}, trained at T = {s.T}, run at {factor}T")
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


def table(result: dict) -> str:
    lines = ["| rule | length | loss, no training | after fine-tune |", "|---|---|---|---|"]
    for row in result["rows"]:
        tuned = row.get("finetuned")
        cell = "-" if tuned is None else f"{tuned:.3f}"
        lines.append(f"| {row['rule']} | {row['factor']}T | {row['scaled']:.3f} | {cell} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cmd = experiment.Command("lab.context_extension", __doc__)
    args = cmd.parse(argv)
    setup = QUICK if args.quick else FULL
    result = run(setup, cmd.header(SCHEMA))
    cmd.write(RESULT_FILE.name, result)
    cmd.write(FIGURE, frequencies_figure())
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/context-extension.md by the build (hooks/results.py) from the result file.


def result() -> str:
    """Each rule's loss at 2x and 4x, without training and fine-tuned; how it ran."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("context-extension.json")
    rows = [
        [
            r["rule"] if r["factor"] > 1 else "trained",
            f"{r['factor']}T",
            f"{r['scaled']:.3f}",
            f"{r['finetuned']:.3f}" if "finetuned" in r else "-",
        ]
        for r in data["rows"]
    ]
    table = markdown_table(["rule", "length", "no training", "fine-tuned"], rows)
    s = data["setup"]
    note = measured_note(
        data,
        [f"trained {s['steps']} steps at T = {s['T']}; fine-tuned {s['finetune_steps']} steps"],
        seeds=s["seed"],
    )
    return f"{table}\n\n{note}"
