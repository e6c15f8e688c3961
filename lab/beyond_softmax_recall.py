"""Recall with a fixed-size state: softmax, linear-only and hybrid GPTs on MQAR.

    python -m lab.beyond_softmax recall            # docs/assets/results/beyond-softmax-recall.json
    python -m lab.beyond_softmax recall --quick    # seconds: seed 0 of each, from the model cache

Three GPTs of four blocks, the same but for their token mixers: every block softmax
attention (ALiBi); every block Gated DeltaNet, each with a small fixed state (2 heads of
4 x 4 numbers); and Qwen3-Next's pattern, three Gated DeltaNet blocks then one softmax
block (lab/mqar.py's BLOCKS). Each is trained once by lab/mqar.py's recipe on
multi-query associative recall (MQAR: pairs "key value", later pairs repeat an earlier
key, whose value must be recalled) with rows of 1 .. 12 distinct keys, then scored at
fixed numbers of pairs: the share of repeated keys whose value the model's top guess
gets right.

Arora et al. 2023 (Zoology, arXiv:2312.04927) predict the outcome: a model whose
memory of the past is a fixed-size state recalls fewer of the pairs as their number
grows past what the state can hold, while attention, which keeps every key, does
not; one attention layer among the recurrent ones recovers most of the gap.

--quick scores seed 0 of each variant, loaded from lab/model_cache.py (committed in
data/trained/; trained on a miss, minutes), on fewer rows: the sign of the effect.
"""

import multiprocessing
import statistics
import time

import torch

from lab.common import RESULTS_DIR, note_load_after, result_header
from lab.experiment import progress
from lab.mqar import BLOCKS, blocks_run, recall
from snippets.linear_attention import gated_delta_recurrent

RECALL_FILE = RESULTS_DIR / "beyond-softmax-recall.json"
RECALL_FIGURE = RESULTS_DIR / "beyond-softmax-recall.svg"
SCHEMA = "attention-guide/beyond-softmax-recall/3"
VARIANTS = tuple(BLOCKS)
LABELS = {"softmax": "softmax only", "linear": "Gated DeltaNet only", "hybrid": "hybrid 3:1"}
FULL = {"seeds": 3, "eval_pairs": [2, 4, 6, 8, 10, 12], "eval_rows": 256, "workers": 1}
QUICK = {"seeds": 1, "eval_pairs": [2, 12], "eval_rows": 64, "workers": 1}


def one_run(job: tuple) -> dict:
    """Train (or load) one (variant, seed) and score it: {pairs: recall}."""
    from lab.model_cache import trained_mqar  # the cache imports lab.mqar, not this

    settings, variant, seed = job
    torch.set_num_threads(1)
    start = time.process_time()
    run = blocks_run(variant, seed)
    model, losses = trained_mqar(run)
    scores = {
        p: round(recall(model, run, p, settings["eval_rows"]), 4) for p in settings["eval_pairs"]
    }
    progress(f"{variant} seed {seed}: {scores} ({time.process_time() - start:.0f} CPU s)")
    seconds = round(time.process_time() - start, 1)
    return {"recall": scores, "final_loss": losses[-1], "cpu_s": seconds}


def run(settings: dict, command: str) -> dict:
    header = result_header(SCHEMA, command)
    jobs = [(settings, v, seed) for seed in range(settings["seeds"]) for v in VARIANTS]
    if settings["workers"] > 1:  # one thread each: the same sums as one after the other
        with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
            runs = list(pool.imap(one_run, jobs))  # seed 0 of each variant first
    else:
        runs = [one_run(job) for job in jobs]
    results = {}
    for variant in VARIANTS:
        mine = [r for (_, v, _), r in zip(jobs, runs, strict=True) if v == variant]
        results[variant] = {
            "layer_types": list(BLOCKS[variant]),
            "recall": {str(p): [r["recall"][p] for r in mine] for p in settings["eval_pairs"]},
            "final_loss": [round(r["final_loss"], 4) for r in mine],
            "cpu_seconds": [r["cpu_s"] for r in mine],  # to train (unless cached) and score
        }
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        # lab/mqar.py's recipe; linear_state: (heads, D) of every Gated DeltaNet block
        "training": {k: v for k, v in blocks_run("hybrid").recipe().items() if k != "layer_types"},
        "variants": results,
    }


def capacity(pairs: int, K: int = 8, n_values: int = 32, rows: int = 64, seed: int = 0):
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


def predictions(data: dict) -> str:
    """Zoology's predictions beside what the committed run measured (means of the seeds),
    each mean against 1 / pairs: what answering with one of the row's values at random
    scores, a model that learned that a value follows a key but not which."""
    pairs = data["settings"]["eval_pairs"]
    few, most = pairs[0], pairs[-1]

    def at(variant):
        means = [mean_recall(data, variant, p) for p in (few, most)]
        seeds = ", ".join(f"{r:.2f}" for r in data["variants"][variant]["recall"][str(most)])
        return f"{means[0]:.2f} at {few} pairs, {means[1]:.2f} at {most} (seeds: {seeds})"

    runs = {v: data["variants"][v]["recall"][str(most)] for v in ("hybrid", "linear")}
    every = min(runs["hybrid"]) > max(runs["linear"])
    guess = all(abs(mean_recall(data, "softmax", p) - 1 / p) < 0.1 for p in pairs)
    return "\n".join(
        [
            f"a guess among the row's values (1 / pairs): {1 / few:.2f} at {few} pairs, "
            f"{1 / most:.2f} at {most}",
            f"linear-only recall falls as the pairs grow: {at('linear')}",
            f"one softmax block recovers it: hybrid {at('hybrid')}; "
            f"above linear-only in every seed at {most} pairs: {every}",
            f"softmax-only keeps it: {at('softmax')}; within 0.1 of the guess at every "
            f"count (not learned): {guess}",
        ]
    )


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
    guess = [1 / p for p in pairs]  # one of the row's values, at random
    ax.plot(pairs, guess, color=COLORS[3], linewidth=1, dashes=(2, 2), label="1 / pairs")
    ax.set_xticks(pairs)
    ax.set_xlabel("distinct keys in the row (pairs)")
    ax.set_ylabel("recall: repeated keys answered right")
    ax.set_ylim(0, 1.02)
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


def add_options(parser) -> None:
    parser.add_argument("--seeds", type=int, help="models per variant")


def settings_from(args) -> dict:
    settings = dict(QUICK if args.quick else FULL)
    if args.seeds is not None:
        if args.seeds <= 0:
            raise SystemExit(f"--seeds ({args.seeds}) must be positive")
        settings["seeds"] = args.seeds
    return settings
