"""Recall with a fixed-size state: softmax, linear-only and hybrid GPTs on MQAR.

    python -m lab.beyond_softmax recall            # docs/assets/results/beyond-softmax-recall.json
    python -m lab.beyond_softmax recall --quick --out /tmp/r.json   # seconds, the sign only

Three GPTs of four blocks, the same but for their token mixers: every block softmax
attention (RoPE); every block Gated DeltaNet (a state of H x D x D per layer); and
Qwen3-Next's pattern, three Gated DeltaNet blocks then one softmax block. Each is
trained on multi-query associative recall (MQAR: pairs "key value", later pairs
repeat an earlier key, whose value must be recalled) with rows of 4 .. max_pairs
distinct keys, then scored at fixed numbers of pairs: the share of repeated keys
whose value the model's top guess gets right.

Arora et al. 2023 (Zoology, arXiv:2312.04927) predict the outcome: a model whose
memory of the past is a fixed-size state recalls fewer of the pairs as their number
grows past what the state can hold, while attention, which keeps every key, does
not; one attention layer among the recurrent ones recovers most of the gap.
"""

import dataclasses
import multiprocessing
import statistics
import time

import torch

from lab.common import RESULTS_DIR, note_load_after, result_header
from lab.experiment import progress
from snippets.linear_attention import gated_delta_recurrent
from snippets.model import GPT, GPTConfig

RECALL_FILE = RESULTS_DIR / "beyond-softmax-recall.json"
RECALL_FIGURE = RESULTS_DIR / "beyond-softmax-recall.svg"
SCHEMA = "attention-guide/beyond-softmax-recall/1"
IGNORE = -100
VARIANTS = {
    "softmax": None,
    "linear": ("linear",) * 4,
    "hybrid": ("linear", "linear", "linear", "softmax"),
}
LABELS = {"softmax": "softmax only", "linear": "Gated DeltaNet only", "hybrid": "hybrid 3:1"}
FULL = {
    "steps": 1200,
    "seeds": 3,
    "batch": 12,
    "length": 64,
    "max_pairs": 16,
    "eval_pairs": [4, 8, 12, 16],
    "eval_rows": 256,
    "lr": 1e-2,
    "n_embed": 32,
    "workers": 2,
}
QUICK = {
    "steps": 3,
    "seeds": 1,
    "batch": 4,
    "length": 16,
    "max_pairs": 6,
    "eval_pairs": [4, 6],
    "eval_rows": 8,
    "lr": 1e-2,
    "n_embed": 16,
    "workers": 1,
}
N_KEYS = N_VALUES = 32


def mqar(batch: int, length: int, min_pairs: int, max_pairs: int, generator):
    """Rows "k v k v ...": the first `pairs` keys distinct, later ones repeats.

    Returns tokens (B, L), targets (B, L) (the value after every key) and recall
    (B, L): True at the repeated keys, where the value can be recalled.
    """
    n = length // 2
    keys = torch.rand(batch, N_KEYS, generator=generator).argsort(dim=-1)
    values = torch.randint(N_KEYS, N_KEYS + N_VALUES, (batch, N_KEYS), generator=generator)
    pairs = torch.randint(min_pairs, max_pairs + 1, (batch, 1), generator=generator)
    slot = torch.arange(n).expand(batch, n)
    asked = (torch.rand(batch, n, generator=generator) * pairs).long()
    slot = torch.where(slot < pairs, slot, asked)
    tokens = torch.stack([keys.gather(1, slot), values.gather(1, slot)], dim=2)
    tokens = tokens.view(batch, length)
    targets = torch.full_like(tokens, IGNORE)
    targets[:, 0::2] = tokens[:, 1::2]
    recall = torch.zeros_like(tokens, dtype=torch.bool)
    recall[:, 0::2] = torch.arange(n) >= pairs
    return tokens, targets, recall


def model_config(settings: dict, variant: str) -> GPTConfig:
    return GPTConfig(
        vocab_size=N_KEYS + N_VALUES,
        context_length=settings["length"],
        n_embed=settings["n_embed"],
        n_head=4,
        n_layer=4,
        position="rope",
        layer_types=VARIANTS[variant],
    )


def train(settings: dict, variant: str, seed: int) -> GPT:
    torch.manual_seed(seed)
    model = GPT(model_config(settings, variant))
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings["lr"], weight_decay=0.0)
    data = torch.Generator().manual_seed(seed)  # the same rows for every variant
    for _ in range(settings["steps"]):
        tokens, targets, _ = mqar(
            settings["batch"], settings["length"], 4, settings["max_pairs"], data
        )
        _, loss = model(tokens, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    return model.eval()


@torch.no_grad()
def recall_at(model: GPT, settings: dict, pairs: int) -> float:
    """The share of repeated keys whose value is the top guess, rows of `pairs` keys."""
    data = torch.Generator().manual_seed(10_000 + pairs)  # unseen, the same for all
    tokens, targets, recall = mqar(settings["eval_rows"], settings["length"], pairs, pairs, data)
    logits, _ = model(tokens)
    right = logits.argmax(-1) == targets
    return right[recall].float().mean().item()


def capacity(pairs: int, K: int = 8, n_values: int = N_VALUES, rows: int = 64, seed: int = 0):
    """The mechanism without training: write `pairs` random unit keys, each with a
    one-hot value, into one K x V delta-rule state (beta = 1, no decay), then read
    every key back; and the same pairs looked up by softmax attention (scores x 20).

    Returns (share recalled by the state, share recalled by softmax attention).
    """
    gen = torch.Generator().manual_seed(seed)
    keys = torch.nn.functional.normalize(torch.randn(rows, 1, pairs, K, generator=gen), dim=-1)
    ids = torch.randint(0, n_values, (rows, 1, pairs), generator=gen)
    values = torch.nn.functional.one_hot(ids, n_values).float()
    ones, zeros = torch.ones(rows, 1, pairs), torch.zeros(rows, 1, pairs)
    _, S = gated_delta_recurrent(keys, keys, values, zeros, ones)  # g = 0, beta = 1
    state = (keys @ S).argmax(-1) == ids  # read each key from the final state
    weights = (keys @ keys.transpose(-1, -2) * 20).softmax(-1)
    softmax = (weights @ values).argmax(-1) == ids
    return state.float().mean().item(), softmax.float().mean().item()


def one_run(job: tuple) -> dict:
    """Train one (settings, variant, seed) and score it: {pairs: recall}."""
    settings, variant, seed = job
    torch.set_num_threads(1)
    start = time.process_time()
    model = train(settings, variant, seed)
    scores = {p: round(recall_at(model, settings, p), 4) for p in settings["eval_pairs"]}
    progress(f"{variant} seed {seed}: {scores} ({time.process_time() - start:.0f} CPU s)")
    return scores


def run(settings: dict, command: str) -> dict:
    header = result_header(SCHEMA, command)
    jobs = [(settings, v, seed) for v in VARIANTS for seed in range(settings["seeds"])]
    if settings["workers"] > 1:  # one thread each: the same sums as one after the other
        with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
            scores = pool.map(one_run, jobs)
    else:
        scores = [one_run(job) for job in jobs]
    results = {}
    for variant in VARIANTS:
        runs = [s for (_, v, _), s in zip(jobs, scores, strict=True) if v == variant]
        results[variant] = {
            "layer_types": list(VARIANTS[variant] or ("softmax",) * 4),
            "recall": {str(p): [r[p] for r in runs] for p in settings["eval_pairs"]},
        }
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        "model": dataclasses.asdict(model_config(settings, "hybrid")),
        "variants": results,
    }


def mean_recall(data: dict, variant: str, pairs: int) -> float:
    return statistics.mean(data["variants"][variant]["recall"][str(pairs)])


def table(data: dict) -> str:
    """Mean recall (lowest and highest seed) per variant and number of pairs."""
    pairs = data["settings"]["eval_pairs"]
    lines = [f"{'pairs':<22}" + "".join(f"{p:>18}" for p in pairs)]
    for variant, r in data["variants"].items():
        cells = []
        for p in pairs:
            runs = r["recall"][str(p)]
            cells.append(f"{statistics.mean(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
        lines.append(f"{LABELS[variant]:<22}" + "".join(f"{c:>18}" for c in cells))
    return "\n".join(lines)


def recall_figure(data: dict):
    """Recall against the number of pairs, one line per variant, every seed a dot."""
    from lab.style import COLORS, pyplot

    plt = pyplot()
    pairs = data["settings"]["eval_pairs"]
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    for (variant, r), color, marker in zip(data["variants"].items(), COLORS, "o^s", strict=False):
        ax.plot(
            pairs,
            [mean_recall(data, variant, p) for p in pairs],
            color=color,
            marker=marker,
            linewidth=1.8,
            label=LABELS[variant],
        )
        for p in pairs:
            runs = r["recall"][str(p)]
            ax.scatter([p] * len(runs), runs, color=color, s=8, alpha=0.6)
    ax.axhline(1 / N_VALUES, color=COLORS[3], linewidth=1, dashes=(2, 2), label="chance")
    ax.set_xticks(pairs)
    ax.set_xlabel("distinct keys in the row (pairs)")
    ax.set_ylabel("recall: repeated keys answered right")
    ax.set_ylim(0, 1.02)
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


def add_options(parser) -> None:
    parser.add_argument("--steps", type=int, help="training steps per model")
    parser.add_argument("--seeds", type=int, help="models per variant")


def settings_from(args) -> dict:
    settings = dict(QUICK if args.quick else FULL)
    for key in ("steps", "seeds"):
        value = getattr(args, key)
        if value is not None:
            if value <= 0:
                raise SystemExit(f"--{key} ({value}) must be positive")
            settings[key] = value
    return settings
