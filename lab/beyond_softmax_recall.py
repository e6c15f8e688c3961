"""Recall with a fixed-size state: softmax, linear-only and hybrid GPTs on MQAR.

    python -m lab.beyond_softmax recall            # docs/assets/results/beyond-softmax-recall.json
    python -m lab.beyond_softmax recall --quick    # seconds: seed 0 of each, from the model cache

Two families of GPTs, each the same but for its token mixers (lab/mqar.py's BLOCKS):
every block softmax attention (ALiBi); every block Gated DeltaNet, each with a small
fixed state (2 heads of 4 x 4 numbers); and a hybrid. With 2 blocks the hybrid is one
Gated DeltaNet block then one softmax block (1 : 1); with 4 blocks it is Qwen3-Next's
pattern, three Gated DeltaNet blocks then one softmax block (3 : 1). Each is trained
once by lab/mqar.py's recipe (the kv-heads page's: 600 steps, no curriculum) on
multi-query associative recall (MQAR: pairs "key value", later pairs repeat an earlier
key, whose value must be recalled) with rows of 1 .. 12 distinct keys, then scored at
fixed numbers of pairs: the share of repeated keys whose value the model's top guess
gets right.

Arora et al. 2023 (Zoology, arXiv:2312.04927) predict the outcome: a model whose
memory of the past is a fixed-size state recalls fewer of the pairs as their number
grows past what the state can hold, while attention, which keeps every key, does
not; one attention layer among the recurrent ones recovers most of the gap.

--quick scores seed 0 of each 2-block variant, loaded from lab/model_cache.py
(committed in data/trained/; trained on a miss, about two minutes), on fewer rows:
the sign of the effect.
"""

import multiprocessing
import statistics
import time

import torch

from lab.common import RESULTS_DIR, note_load_after, result_header
from lab.experiment import count, progress
from lab.mqar import BLOCKS, BLOCKS_CACHED, blocks_run, recall
from snippets.linear_attention import gated_delta_recurrent

RECALL_FILE = RESULTS_DIR / "beyond-softmax-recall.json"
RECALL_FIGURE = RESULTS_DIR / "beyond-softmax-recall.svg"
SCHEMA = "attention-guide/beyond-softmax-recall/3"
VARIANTS = tuple(BLOCKS)
LABELS = {
    "softmax": "softmax only",
    "linear": "Gated DeltaNet only",
    "hybrid": "hybrid 1:1",
    "softmax-4": "softmax only",
    "linear-4": "Gated DeltaNet only",
    "hybrid-4": "hybrid 3:1",
}
FAMILIES = {"2 blocks": VARIANTS[:3], "4 blocks": VARIANTS[3:]}
FULL = {
    "seeds": 3,
    "eval_pairs": [2, 4, 6, 8, 10, 12],
    "eval_rows": 256,
    "workers": 1,
    "variants": list(VARIANTS),
}
QUICK = {  # the cached seed-0 models (lab/mqar.py's BLOCKS_CACHED)
    "seeds": 1,
    "eval_pairs": [2, 12],
    "eval_rows": 128,
    "workers": 1,
    "variants": list(BLOCKS_CACHED),
}


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
    names = settings["variants"]
    jobs = [(settings, v, seed) for v in names for seed in range(settings["seeds"])]
    if settings["workers"] > 1:  # one thread each: the same sums as one after the other
        with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
            runs = list(pool.imap(one_run, jobs))  # seed 0 of each variant first
    else:
        runs = [one_run(job) for job in jobs]
    results = {}
    for variant in names:
        mine = [r for (_, v, _), r in zip(jobs, runs, strict=True) if v == variant]
        results[variant] = {
            "layer_types": list(BLOCKS[variant] or ("softmax",) * 2),
            "recall": {str(p): [r["recall"][p] for r in mine] for p in settings["eval_pairs"]},
            "final_loss": [round(r["final_loss"], 4) for r in mine],
            "cpu_seconds": [r["cpu_s"] for r in mine],  # to train (unless cached) and score
        }
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        # lab/mqar.py's recipe; linear_state: (heads, D) of every Gated DeltaNet block
        "training": {
            k: v
            for k, v in blocks_run("hybrid").recipe().items()
            if k not in ("layer_types", "n_layer")
        },
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


def family_of(variant: str) -> str:
    return next(f for f, names in FAMILIES.items() if variant in names)


def table(data: dict) -> str:
    """Mean recall (lowest and highest seed) per variant and number of pairs."""
    pairs = data["settings"]["eval_pairs"]
    lines = [f"{'pairs':<32}" + "".join(f"{p:>18}" for p in pairs)]
    for variant, r in data["variants"].items():
        cells = []
        for p in pairs:
            runs = r["recall"][str(p)]
            cells.append(f"{statistics.mean(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
        name = f"{family_of(variant)}: {LABELS[variant]}"
        lines.append(f"{name:<32}" + "".join(f"{c:>18}" for c in cells))
    return "\n".join(lines)


def verdicts(data: dict, family: str) -> dict:
    """What Zoology predicts, measured on one family (means over the seeds):
    softmax learned the lookup (at least 0.3 above 1 / pairs at every count), linear-
    only learned it at all (0.1 above 1 / pairs at some count: else its recall falls
    with the pairs only as a guess does), the hybrid above linear-only in every seed
    at the most pairs, and the hybrid minus softmax at the most pairs."""
    softmax, linear, hybrid = FAMILIES[family]
    pairs = data["settings"]["eval_pairs"]
    most = pairs[-1]
    seeds = {v: data["variants"][v]["recall"][str(most)] for v in (linear, hybrid)}
    return {
        "softmax_learned": all(mean_recall(data, softmax, p) > 1 / p + 0.3 for p in pairs),
        "linear_learned": any(mean_recall(data, linear, p) > 1 / p + 0.1 for p in pairs),
        "hybrid_above_linear": min(seeds[hybrid]) > max(seeds[linear]),
        "hybrid_minus_softmax": mean_recall(data, hybrid, most) - mean_recall(data, softmax, most),
    }


def predictions(data: dict) -> str:
    """Zoology's predictions beside what the committed run measured, per family."""
    pairs = data["settings"]["eval_pairs"]
    few, most = pairs[0], pairs[-1]
    lines = [f"1 / pairs (a guess among the row's values): {1 / few:.2f} at {few}, "
             f"{1 / most:.2f} at {most}"]  # fmt: skip
    for family, (softmax, linear, hybrid) in FAMILIES.items():
        v = verdicts(data, family)

        def at(variant):
            means = [mean_recall(data, variant, p) for p in (few, most)]
            return f"{means[0]:.2f} at {few} pairs, {means[1]:.2f} at {most}"

        lines += [
            f"{family}:",
            f"  softmax only (predicted to keep recall): {at(softmax)}; "
            f"learned: {v['softmax_learned']}",
            f"  Gated DeltaNet only (predicted to lose it): {at(linear)}; "
            f"learned: {v['linear_learned']}",
            f"  {LABELS[hybrid]} (predicted to recover it): {at(hybrid)}; above linear-only in "
            f"every seed at {most}: {v['hybrid_above_linear']}; minus softmax at {most}: "
            f"{v['hybrid_minus_softmax']:+.2f}",
        ]
    return "\n".join(lines)


def recall_figure(data: dict):
    """Recall against the number of pairs, a panel per family, a line per variant (the
    mean), every seed a dot."""
    from lab.style import COLORS, INK, pyplot

    plt = pyplot()
    pairs = data["settings"]["eval_pairs"]
    fig, axes = plt.subplots(1, 2, figsize=(6.4, 3.8), sharey=True)
    for ax, (family, names) in zip(axes, FAMILIES.items(), strict=True):
        for variant, color, marker in zip(names, COLORS[:3], "o^s", strict=True):
            ax.plot(
                pairs,
                [mean_recall(data, variant, p) for p in pairs],
                color=color,
                marker=marker,
                linewidth=1.8,
                label=LABELS[variant].replace(" 1:1", "").replace(" 3:1", ""),
            )
            for p in pairs:
                runs = data["variants"][variant]["recall"][str(p)]
                ax.scatter([p] * len(runs), runs, color=color, s=8, alpha=0.6)
        guess = [1 / p for p in pairs]  # one of the row's values, at random
        ax.plot(pairs, guess, color=INK, linewidth=1, dashes=(2, 2), label="1 / pairs")
        ratio = "1:1" if family == "2 blocks" else "3:1"
        ax.set_title(f"{family}, hybrid {ratio}")
        ax.set_xticks(pairs)
        ax.set_xlabel("pairs in the row")
        ax.set_ylim(0, 1.02)
        ax.grid(True)
    axes[0].set_ylabel("recall of repeated keys")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize="small")
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def add_options(parser) -> None:
    parser.add_argument("--seeds", type=count, help="models per variant")


def settings_from(args) -> dict:
    settings = dict(QUICK if args.quick else FULL)
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    return settings
