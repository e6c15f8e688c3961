"""Recall with a fixed-size state: softmax, linear-only and hybrid GPTs on MQAR.

    python -m lab.beyond_softmax recall            # docs/assets/results/beyond-softmax-recall.json
    python -m lab.beyond_softmax recall --quick    # seconds: seed 0 of each, from the model cache

Three GPTs of 4 blocks, the same but for their token mixers (lab/recipes/mqar.py's BLOCKS):
every block softmax attention (ALiBi); every block Gated DeltaNet, with the softmax
block's heads and widths and so a fixed state of 8 heads of 4 x 4 numbers; and the
hybrid of Qwen3-Next, three Gated DeltaNet blocks then one softmax block (3 : 1).
Each is trained by lab/recipes/mqar.py's recipe (600 steps of 256 rows, no curriculum) on
multi-query associative recall (MQAR: pairs "key value", later pairs repeat an earlier
key, whose value must be recalled) with rows of 1 .. 12 distinct keys, then scored at
fixed numbers of pairs: the share of repeated keys whose value the model's top guess
gets right.

Arora et al. 2023 (Zoology, arXiv:2312.04927) predict the outcome: a model whose
memory of the past is a fixed-size state recalls fewer of the pairs as their number
grows past what the state can hold, while attention, which keeps every key, does
not; a few attention layers among the recurrent ones close most of the gap.

--quick scores seed 0 of each variant, loaded from lab/model_cache.py (committed in
data/trained/; trained on a miss, about twenty CPU minutes), on fewer rows: the sign
of the effect.
"""

import multiprocessing
import statistics
import time

import torch

from lab.recipes.mqar import BLOCKS, BLOCKS_CACHED, blocks_run, recall
from lab.shared import experiment
from lab.shared.common import RESULTS_DIR, note_load_after, result_header
from lab.shared.experiment import count, progress
from snippets.layers.linear_attention import gated_delta_recurrent

RECALL_FILE = RESULTS_DIR / "beyond-softmax-recall.json"
RECALL_FIGURE = RESULTS_DIR / "beyond-softmax-recall.svg"
SCHEMA = "attention-guide/beyond-softmax-recall/3"
VARIANTS = tuple(BLOCKS)
LABELS = {
    "softmax": "softmax only",
    "linear": "Gated DeltaNet only",
    "hybrid": "hybrid 3:1",
}
FULL = {
    "seeds": 3,
    "eval_pairs": [2, 4, 6, 8, 10, 12],
    "eval_rows": 256,
    "workers": 2,
    "variants": list(VARIANTS),
}
QUICK = {  # the cached seed-0 models (lab/recipes/mqar.py's BLOCKS_CACHED)
    "seeds": 1,
    "eval_pairs": [2, 12],
    "eval_rows": 128,
    "workers": 1,
    "variants": list(BLOCKS_CACHED),
}


def one_run(job: tuple) -> dict:
    """Train (or load) one (variant, seed) and score it: {pairs: recall}."""
    from lab.model_cache import trained_mqar  # the cache imports lab.recipes.mqar, not this

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
            "layer_types": list(BLOCKS[variant]),
            "recall": {str(p): [r["recall"][p] for r in mine] for p in settings["eval_pairs"]},
            "final_loss": [round(r["final_loss"], 4) for r in mine],
            "cpu_seconds": [r["cpu_s"] for r in mine],  # to train (unless cached) and score
        }
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        # lab/recipes/mqar.py's recipe; linear_state: (heads, D) of every Gated DeltaNet block
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


def median_recall(data: dict, variant: str, pairs: int) -> float:
    """The median over the seeds: one seed that never learned (stayed at a guess)
    does not move it, where it would drag a mean halfway down."""
    return statistics.median(data["variants"][variant]["recall"][str(pairs)])


def table(data: dict) -> str:
    """Median recall (lowest and highest seed) per variant and number of pairs."""
    pairs = data["settings"]["eval_pairs"]
    lines = [f"{'pairs':<20}" + "".join(f"{p:>17}" for p in pairs)]
    for variant, r in data["variants"].items():
        cells = []
        for p in pairs:
            runs = r["recall"][str(p)]
            cells.append(f"{statistics.median(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
        lines.append(f"{LABELS[variant]:<20}" + "".join(f"{c:>17}" for c in cells))
    return "\n".join(lines)


def learned(data: dict, variant: str) -> list[bool]:
    """Per seed: did the model learn the lookup? Its recall at the fewest pairs at least
    0.3 above 1 / pairs (a guess among the row's values); else its recall falls with
    the pairs only as a guess's does."""
    few = data["settings"]["eval_pairs"][0]
    return [r > 1 / few + 0.3 for r in data["variants"][variant]["recall"][str(few)]]


def verdicts(data: dict) -> dict:
    """What Zoology predicts, measured: the seeds of each variant that learned the
    lookup; linear-only's change in median recall from the fewest pairs to the most;
    the hybrid above linear-only in every seed at the most pairs; and the hybrid's
    median recall at the most pairs minus softmax-only's."""
    pairs = data["settings"]["eval_pairs"]
    few, most = pairs[0], pairs[-1]
    at_most = {v: data["variants"][v]["recall"][str(most)] for v in ("linear", "hybrid")}
    return {
        **{f"{v}_learned": sum(learned(data, v)) for v in VARIANTS},
        "linear_fall": median_recall(data, "linear", most) - median_recall(data, "linear", few),
        "hybrid_above_linear": min(at_most["hybrid"]) > max(at_most["linear"]),
        "hybrid_minus_softmax": median_recall(data, "hybrid", most)
        - median_recall(data, "softmax", most),
    }


def page_values(data: dict) -> dict[str, str]:
    """The numbers of the page's verdicts: each variant's median at the fewest and the most
    pairs (linear_2, linear_12) and its seeds' range at the most (linear_12_low, ..._high);
    linear-only's fall in median; for the seeds of softmax-only that learned, their range
    at the most pairs and their mean fall from the fewest; the hybrid minus softmax-only's
    median at the most."""
    pairs = data["settings"]["eval_pairs"]
    few, most = str(pairs[0]), str(pairs[-1])
    runs = {v: r["recall"] for v, r in data["variants"].items()}
    out = {}
    for v, r in runs.items():
        out[f"{v}_{few}"] = f"{median_recall(data, v, pairs[0]):.2f}"
        out[f"{v}_{few}_low"] = f"{min(r[few]):.2f}"
        out[f"{v}_{most}"] = f"{median_recall(data, v, pairs[-1]):.2f}"
        out[f"{v}_{most}_low"] = f"{min(r[most]):.2f}"
        out[f"{v}_{most}_high"] = f"{max(r[most]):.2f}"
    v = verdicts(data)
    out["linear_fall"] = f"{-v['linear_fall']:.2f}"
    kept = [i for i, ok in enumerate(learned(data, "softmax")) if ok]
    at_most = [runs["softmax"][most][i] for i in kept]
    out["softmax_learned_low"] = f"{min(at_most):.2f}"
    out["softmax_learned_high"] = f"{max(at_most):.2f}"
    falls = [runs["softmax"][few][i] - runs["softmax"][most][i] for i in kept]
    out["softmax_learned_fall"] = f"{statistics.mean(falls):.2f}"
    out["hybrid_minus_softmax"] = f"{v['hybrid_minus_softmax']:.2f}"
    return out


def predictions(data: dict) -> str:
    """Zoology's predictions beside what the committed run measured."""
    pairs = data["settings"]["eval_pairs"]
    few, most = pairs[0], pairs[-1]
    seeds = data["settings"]["seeds"]
    v = verdicts(data)

    def at(variant):
        medians = [median_recall(data, variant, p) for p in (few, most)]
        return (
            f"{medians[0]:.2f} at {few} pairs, {medians[1]:.2f} at {most}; "
            f"learned in {v[variant + '_learned']} of {seeds} seeds"
        )

    return "\n".join([
        f"1 / pairs (a guess among the row's values): {1 / few:.2f} at {few}, "
        f"{1 / most:.2f} at {most}",
        f"softmax only (predicted to keep recall): {at('softmax')}",
        f"Gated DeltaNet only (predicted to lose it): {at('linear')}; "
        f"from {few} to {most} pairs: {v['linear_fall']:+.2f}",
        f"hybrid 3:1 (predicted to recover it): {at('hybrid')}; above linear-only in "
        f"every seed at {most}: {v['hybrid_above_linear']}; minus softmax only at {most}: "
        f"{v['hybrid_minus_softmax']:+.2f}",
    ])  # fmt: skip


def recall_figure(data: dict):
    """Recall against the number of pairs, a line per variant (the median over the
    seeds), every seed a dot, and a guess among the row's values."""
    from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot

    plt = pyplot(FIGURE_WIDTH)
    pairs = data["settings"]["eval_pairs"]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.6))
    for variant, color, marker in zip(VARIANTS, COLORS[:3], "o^s", strict=True):
        ax.plot(
            pairs,
            [median_recall(data, variant, p) for p in pairs],
            color=color,
            marker=marker,
            linewidth=1.8,
            label=LABELS[variant],
        )
        for p in pairs:
            runs = data["variants"][variant]["recall"][str(p)]
            ax.scatter([p] * len(runs), runs, color=color, s=8, alpha=0.6)
    guess = [1 / p for p in pairs]  # one of the row's values, at random
    ax.plot(pairs, guess, color=INK, linewidth=1, dashes=(2, 2), label="1 / pairs (a guess)")
    ax.set_title("4-block GPTs on MQAR (median of the seeds)", color=INK)
    ax.set_xticks(pairs)
    ax.set_xlabel("pairs in the row")
    ax.set_ylabel("recall of repeated keys")
    ax.set_ylim(0, 1.02)
    ax.grid(True)
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.2))  # off the lines
    fig.tight_layout()
    return fig


def add_options(parser) -> None:
    parser.add_argument("--seeds", type=count, help="models per variant")
    experiment.add_jobs(parser, FULL["workers"])


def settings_from(args) -> dict:
    settings = dict(QUICK if args.quick else FULL)
    settings["workers"] = experiment.jobs(args)  # the result file's name for it
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    return settings


# ------------------------------------------------------------------ the page's results
# Rendered into docs/linear-recall.md by the build (hooks/results.py) from the result file.


def recall_values() -> dict[str, str]:
    """page_values of the committed run, for the page's prose."""
    from lab.shared.result_pages import load, value_table

    return value_table(page_values(load("beyond-softmax-recall.json")))


def recall_result() -> str:
    """Median recall (lowest-highest seed), a row per number of pairs, a column per
    variant; Zoology's predictions beside the measurement; how the run was made."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("beyond-softmax-recall.json")
    rows = []
    for p in data["settings"]["eval_pairs"]:
        cells = [str(p)]
        for r in data["variants"].values():
            runs = r["recall"][str(p)]
            cells.append(f"{statistics.median(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
        rows.append(cells)
    header = ["pairs", *(LABELS[v] for v in data["variants"])]
    table = markdown_table(header, rows, "median recall (lowest-highest seed)")
    verdict = "\n".join(f"- {line}" for line in predictions(data).splitlines())
    s, t = data["settings"], data["training"]
    cpu = sum(sum(v["cpu_seconds"]) for v in data["variants"].values())
    note = measured_note(
        data,
        [
            f"C={t['n_embed']}, T={t['length']}, pairs {t['min_pairs']}-{t['max_pairs']};"
            f" {t['steps']} steps of {t['batch']} rows, lr {t['lr']};"
            f" {s['eval_rows']} rows scored per count",
            f"{s['seeds'] * len(data['variants'])} models trained and scored",
        ],
        seeds=list(range(s["seeds"])) if isinstance(s["seeds"], int) else s["seeds"],
        seconds=cpu,
        clock="CPU",
    )
    return f"{table}\n\n{verdict}\n\n{note}"
