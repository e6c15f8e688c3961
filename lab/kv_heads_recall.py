"""MHA, GQA, MQA and MLA on multi-query associative recall: recall against the pairs.

    python -m lab.kv_heads_recall          # docs/assets/results/kv-heads-recall.json + SVG
    python -m lab.kv_heads_recall --quick --out /tmp/kv   # seconds: the suite's sign check

The same small GPT (2 layers, 4 query heads of D = 16, width 64, ALiBi) four times,
differing only in how many key/value heads its attention keeps: MHA 4, GQA 2, MQA 1,
and MLA with a latent of 2 x D = 32 numbers (as many cached numbers as MQA). Each is
trained on MQAR rows of 1..12 pairs (lab/recipes/mqar.py's recipe) from several seeds and
scored at each number of pairs. The only path from a pair to the key that asks for
it is attention, and what a position offers it is what the cache keeps of it:
G x D numbers of key and as many of value (MHA 64 each, MQA 16) or MLA's latent.

--quick loads the seed-0 MHA and MQA models from the trained-model cache
(lab/model_cache.py; trained once per version of the code, about four minutes) and
scores them on fewer rows: the suite checks the sign of the page's effect.
"""

import dataclasses
import math
import multiprocessing
import statistics
import sys
import time

from lab.recipes.kv_heads_models import CACHED, VARIANTS, D, run_of
from lab.recipes.mqar import MqarRun, recall, train_mqar
from lab.shared.common import RESULTS_DIR, note_load_after
from lab.shared.experiment import Command, count, progress
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot

RESULT_FILE = RESULTS_DIR / "kv-heads-recall.json"
FIGURE = RESULTS_DIR / "kv-heads-recall.svg"
SCHEMA = "attention-guide/kv-heads-recall/1"
BASE = run_of("MHA")  # the sizes and recipe every variant shares
FULL = {
    "seeds": 5,
    "eval_pairs": [1, 2, 4, 6, 8, 10, 12],
    "eval_rows": 512,
    "workers": 2,
}
QUICK = {
    "seeds": 1,
    "eval_pairs": [2, 12],
    "eval_rows": 128,
    "workers": 1,
}
QUICK_VARIANTS = CACHED  # the cached seed-0 models
TRIALS_FILE = RESULTS_DIR / "kv-heads-recall-trials.json"
TRIALS_SCHEMA = "attention-guide/kv-heads-recall-trials/1"
_MLA = dataclasses.replace(run_of("MLA"), attention=(("kv_latent", 2 * D), ("latent_norm", False)))
# What was tried before the sizes and the latent norm of the runs above (--trials):
# seed-0 runs of the same recipe, each changed as its name says.
TRIALS = {
    "MQA, 8 heads of D = 4 (width 32)": dataclasses.replace(run_of("MQA"), n_embed=32, n_head=8),
    "MQA, 8 heads of D = 8": dataclasses.replace(run_of("MQA"), n_head=8),
    "MQA, 8 heads of D = 8, 1,500 steps": dataclasses.replace(run_of("MQA"), n_head=8, steps=1500),
    "MLA, latent not normalised": _MLA,
    "MLA, latent not normalised, 1,500 steps": dataclasses.replace(_MLA, steps=1500),
    "MLA, latent not normalised, latent of 64": dataclasses.replace(
        _MLA, attention=(("kv_latent", 64), ("latent_norm", False))),
    "MLA, latent not normalised, seed 1": dataclasses.replace(_MLA, seed=1),
}  # fmt: skip


def cached_numbers(variant: str) -> int:
    """Numbers a cache keeps per token and layer: 2 x G x D, or MLA's latent."""
    attention = dict(VARIANTS[variant])
    if "kv_latent" in attention:
        return attention["kv_latent"]
    return 2 * attention.get("n_kv_head", BASE.n_head) * D


def score(model, run: MqarRun, settings: dict) -> dict[str, float]:
    return {
        str(p): round(recall(model, run, p, settings["eval_rows"]), 4)
        for p in settings["eval_pairs"]
    }


def one_job(job: tuple) -> dict:
    """Train one (variant, seed), score it: {"recall": {pairs: share}, ...}."""
    variant, seed, settings = job
    import torch

    torch.set_num_threads(1)
    start = time.process_time()
    run = run_of(variant, seed)
    if variant in CACHED and seed == 0:  # the models the quick check loads: keep them
        from lab.model_cache import trained_kv_heads

        model, losses = trained_kv_heads(run)
    else:
        model, losses = train_mqar(run)
    scores = score(model, run, settings)
    seconds = time.process_time() - start
    progress(f"{variant} seed {seed}: {scores} ({seconds:.0f} CPU s)")
    return {"recall": scores, "final_loss": losses[-1], "cpu_seconds": round(seconds, 1)}


def quick_job(job: tuple) -> dict:
    """The cached seed-0 model of a variant, scored (no training if the cache holds it)."""
    variant, seed, settings = job
    from lab.model_cache import trained_kv_heads

    run = run_of(variant, seed)
    model, losses = trained_kv_heads(run)
    return {"recall": score(model, run, settings), "final_loss": losses[-1]}


def run(settings: dict, header: dict, quick: bool) -> dict:
    names = QUICK_VARIANTS if quick else tuple(VARIANTS)
    jobs = [(v, seed, settings) for v in names for seed in range(settings["seeds"])]
    work = quick_job if quick else one_job
    started = time.perf_counter()
    if settings["workers"] > 1:  # one thread each: the same sums as one after the other
        with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
            done = pool.map(work, jobs)
    else:
        done = [work(job) for job in jobs]
    variants = {}
    for name in names:
        runs = [d for (v, _, _), d in zip(jobs, done, strict=True) if v == name]
        variants[name] = {
            "attention": dict(VARIANTS[name]),
            "cached_numbers_per_token_and_layer": cached_numbers(name),
            "recall": {p: [r["recall"][p] for r in runs] for p in map(str, settings["eval_pairs"])},
            "final_loss": [r["final_loss"] for r in runs],
            "cpu_seconds": [r.get("cpu_seconds") for r in runs],
        }
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        "run": BASE.recipe(),
        "chance": round(1 / BASE.n_values, 4),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "variants": variants,
    }


def trial_job(job: tuple) -> dict:
    """Train and score one trial of TRIALS: {"run": its recipe, "recall": ..., ...}."""
    name, settings = job
    import torch

    torch.set_num_threads(1)
    run = TRIALS[name]
    attention = dict(run.attention)
    start = time.process_time()
    model, losses = train_mqar(run)
    scores = score(model, run, settings)
    seconds = time.process_time() - start
    progress(f"{name}: {scores} ({seconds:.0f} CPU s)")
    return {
        "run": {**run.recipe(), "attention": attention, "seed": run.seed},
        "latent_normalised": (
            attention.get("latent_norm", True) if "kv_latent" in attention else None
        ),
        "recall": scores,
        "final_loss": losses[-1],
        "cpu_seconds": round(seconds, 1),
    }


def run_trials(settings: dict, header: dict) -> dict:
    jobs = [(name, settings) for name in TRIALS]
    with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
        done = pool.map(trial_job, jobs)
    note_load_after(header)
    return {**header, "settings": settings, "trials": dict(zip(TRIALS, done, strict=True))}


def mean_recall(data: dict, variant: str, pairs: int) -> float:
    return statistics.mean(data["variants"][variant]["recall"][str(pairs)])


def table(data: dict) -> str:
    """Mean recall (lowest..highest seed): a row per number of pairs, a column per
    variant, and 1 / pairs: a guess among the values of the row."""
    names = list(data["variants"])
    cached = [data["variants"][v]["cached_numbers_per_token_and_layer"] for v in names]
    lines = [
        "pairs" + "".join(f"{v:>18}" for v in names) + "   1/pairs",
        "cached" + "".join(f"{f'{c} numbers':>18}" for c in cached)[1:],
    ]
    for p in data["settings"]["eval_pairs"]:
        cells = []
        for name in names:
            runs = data["variants"][name]["recall"][str(p)]
            cells.append(f"{statistics.mean(runs):.2f} ({min(runs):.2f}..{max(runs):.2f})")
        lines.append(f"{p:>5}" + "".join(f"{c:>18}" for c in cells) + f"{1 / p:>10.2f}")
    return "\n".join(lines)


def separated(data: dict) -> list[tuple[str, str, int]]:
    """Every (lower, upper, pairs) where all seeds of `lower` recall less than all seeds
    of `upper`: the differences the seeds let one call an effect."""
    runs = data["variants"]
    return [
        (a, b, p)
        for p in data["settings"]["eval_pairs"]
        for a in runs
        for b in runs
        if a != b and max(runs[a]["recall"][str(p)]) < min(runs[b]["recall"][str(p)])
    ]


def recall_figure(data: dict):
    """Recall against the number of pairs: a line per variant (the mean), a dot per seed."""
    plt = pyplot(FIGURE_WIDTH)
    pairs = data["settings"]["eval_pairs"]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5.4))
    markers = "os^D"
    for (name, r), color, marker in zip(data["variants"].items(), COLORS, markers, strict=False):
        cached = r["cached_numbers_per_token_and_layer"]
        ax.plot(
            pairs,
            [mean_recall(data, name, p) for p in pairs],
            color=color,
            marker=marker,
            linewidth=1.8,
            label=f"{name} ({cached} cached numbers)",
        )
        for p in pairs:
            runs = r["recall"][str(p)]
            ax.scatter([p] * len(runs), runs, color=color, s=10, alpha=0.6)
    ax.plot(pairs, [1 / p for p in pairs], color=INK, linewidth=1, dashes=(2, 2),
            label="1 / pairs: a guess among the row's values")  # fmt: skip
    ax.set_xticks(pairs)
    ax.set_xlabel("distinct keys in the row (pairs)")
    ax.set_ylabel("recall of repeated keys")
    ax.set_ylim(0, 1.02)
    ax.grid(True)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2))
    fig.tight_layout()
    return fig


FIGURES = {FIGURE.name: recall_figure}


def main(argv: list[str] | None = None) -> int:
    cmd = Command("lab.kv_heads_recall", __doc__, threads=1, jobs=FULL["workers"])
    cmd.parser.add_argument("--seeds", type=count, help="models per variant")
    cmd.parser.add_argument(
        "--trials", action="store_true", help=f"what was tried first: {TRIALS_FILE.name}"
    )
    args = cmd.parse(argv)
    settings = dict(QUICK if args.quick else FULL)
    settings["workers"] = args.jobs  # the result file's name for it
    if args.trials:
        settings = {k: v for k, v in settings.items() if k != "seeds"}
        data = run_trials(settings, cmd.header(TRIALS_SCHEMA))
        cmd.write(TRIALS_FILE.name, data)
        for name, t in data["trials"].items():
            print(f"{name}: " + ", ".join(f"{p} pairs {r:.2f}" for p, r in t["recall"].items()))
        return 0
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    data = run(settings, cmd.header(SCHEMA), args.quick)
    cmd.write(RESULT_FILE.name, data)
    cmd.write(FIGURE.name, recall_figure(data))
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/kv-recall.md by the build (hooks/results.py) from the result file.


def _spread(runs: list[float]) -> str:
    return f"{statistics.mean(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})"


def result() -> str:
    """Mean recall (lowest-highest seed), a row per number of pairs, a column per variant
    with what its cache keeps; a guess's score beside them; how the run was made."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load(RESULT_FILE.name)
    variants = data["variants"]
    header = ["pairs"]
    header += [
        f"{n}, {r['cached_numbers_per_token_and_layer']} cached" for n, r in variants.items()
    ]
    header.append("guess: 1/pairs")
    rows = [
        [str(p), *(_spread(r["recall"][str(p)]) for r in variants.values()), f"{1 / p:.2f}"]
        for p in data["settings"]["eval_pairs"]
    ]
    table = markdown_table(header, rows, "mean recall of repeated keys (lowest-highest seed)")
    s, t = data["settings"], data["run"]
    cpu = sum(sum(r["cpu_seconds"]) for r in variants.values())
    note = measured_note(
        data,
        [
            f"{t['n_layer']} layers, {t['n_head']} query heads of D = {t['n_embed'] // t['n_head']}"
            f" in a width of {t['n_embed']}; rows of {t['length']} tokens, {t['min_pairs']} to"
            f" {t['max_pairs']} pairs, {t['n_keys']} key ids and {t['n_values']} value ids",
            f"{t['steps']} steps of {t['batch']} rows, AdamW at lr {t['lr']} with"
            f" {t['warmup']} warm-up steps and a cosine decay",
            f"{s['eval_rows']} fresh rows scored per number of pairs;"
            f" {s['seeds'] * len(variants)} models trained and scored",
        ],
        seeds=list(range(s["seeds"])),
        seconds=cpu,
        clock="CPU",
    )
    return f"{table}\n\n{note}"


def values() -> dict[str, str]:
    """The numbers of the page's prose: each variant's mean and seed range at each number
    of pairs (mha_2, mha_2_low, mha_2_high, ...); the lowest seed of all at 2 pairs."""
    from lab.shared.result_pages import load, value_table

    data = load(RESULT_FILE.name)
    runs = data["variants"]
    out = {"seeds": str(data["settings"]["seeds"]), "steps": f"{data['run']['steps']:,}"}
    for name, r in runs.items():
        for p, seeds in r["recall"].items():
            out[f"{name.lower()}_{p}"] = f"{statistics.mean(seeds):.2f}"
            out[f"{name.lower()}_{p}_low"] = f"{min(seeds):.2f}"
            out[f"{name.lower()}_{p}_high"] = f"{max(seeds):.2f}"
    lowest = min(min(r["recall"]["2"]) for r in runs.values())
    out["lowest_2"] = f"{math.floor(lowest * 100) / 100:.2f}"  # "or more": rounded down
    return value_table(out)


def trials_result() -> str:
    """What was tried first (TRIALS): a row per trial, its recall at two and at the most
    pairs, and a guess's; how the trials were run."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load(TRIALS_FILE.name)
    most = str(max(data["settings"]["eval_pairs"]))
    rows = [
        [name, f"{t['recall']['2']:.2f}", f"{t['recall'][most]:.2f}"]
        for name, t in data["trials"].items()
    ]
    header = ["trial (seed 0 unless named)", "recall, 2 pairs", f"recall, {most} pairs"]
    guess = (
        f"a guess among the row's values scores about 0.50 at 2 pairs and {1 / int(most):.2f}"
        f" at {most} (a little more where two keys share a value)"
    )
    cpu = sum(t["cpu_seconds"] for t in data["trials"].values())
    note = measured_note(
        data,
        [
            "each trial: the recipe of the runs on the page, changed as its name says",
            f"{data['settings']['eval_rows']} fresh rows scored per number of pairs",
        ],
        seconds=cpu,
        clock="CPU",
    )
    return f"{markdown_table(header, rows)}\n\n{guess[0].upper()}{guess[1:]}.\n\n{note}"
