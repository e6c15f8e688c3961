"""MHA, GQA, MQA and MLA on multi-query associative recall: recall against the pairs.

    python -m lab.kv_heads_recall          # docs/assets/results/kv-heads-recall.json + SVG
    python -m lab.kv_heads_recall --quick --out /tmp/kv   # seconds: the suite's sign check

The same small GPT (2 layers, 8 query heads of D = 4, width 32, ALiBi) four times,
differing only in how many key/value heads its attention keeps: MHA 8, GQA 2, MQA 1,
and MLA with a latent of 2 x D = 8 numbers (as many cached numbers as MQA). Each is
trained on MQAR rows of 1..12 pairs (lab/mqar.py's recipe) from several seeds and
scored at each number of pairs. The only path from a pair to the key that asks for
it is attention, and what a position offers it is what the cache keeps of it:
G x D numbers of key and as many of value (MHA 32, MQA 4) or MLA's latent.

--quick loads the seed-0 MHA and MQA models from the trained-model cache
(lab/model_cache.py; trained once per version of the code, about two minutes) and
scores them on fewer rows: the suite checks that at the most pairs MQA recalls less.
"""

import dataclasses
import multiprocessing
import statistics
import sys
import time

from lab.common import RESULTS_DIR, note_load_after
from lab.experiment import Command, count, progress
from lab.mqar import CACHED, VARIANTS, D, MqarRun, recall, run_of, train_mqar
from lab.style import COLORS, FIGURE_WIDTH, INK, pyplot

RESULT_FILE = RESULTS_DIR / "kv-heads-recall.json"
FIGURE = RESULTS_DIR / "kv-heads-recall.svg"
SCHEMA = "attention-guide/kv-heads-recall/1"
BASE = MqarRun()
# long_steps: seed 0 of the long_variants once more, trained 2.5 times longer, to
# tell "learns slower" from "cannot recall" (0: none).
FULL = {
    "seeds": 3,
    "eval_pairs": [1, 2, 4, 6, 8, 10, 12],
    "eval_rows": 512,
    "workers": 2,
    "long_steps": 1500,
    "long_variants": ["MQA"],
}
QUICK = {
    "seeds": 1,
    "eval_pairs": [2, 12],
    "eval_rows": 128,
    "workers": 1,
    "long_steps": 0,
    "long_variants": [],
}
QUICK_VARIANTS = CACHED  # the cached seed-0 models


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
    """Train one (variant, seed, steps), score it: {"recall": {pairs: share}, ...}."""
    variant, seed, settings, steps = job
    import torch

    torch.set_num_threads(1)
    start = time.process_time()
    run = dataclasses.replace(run_of(variant, seed), steps=steps)
    if (
        variant in CACHED and seed == 0 and steps == BASE.steps
    ):  # the models the quick check loads: keep them
        from lab.model_cache import trained_mqar

        model, losses = trained_mqar(run)
    else:
        model, losses = train_mqar(run)
    scores = score(model, run, settings)
    seconds = time.process_time() - start
    progress(f"{variant} seed {seed}, {steps} steps: {scores} ({seconds:.0f} CPU s)")
    return {"recall": scores, "final_loss": losses[-1], "cpu_seconds": round(seconds, 1)}


def quick_job(job: tuple) -> dict:
    """The cached seed-0 model of a variant, scored (no training if the cache holds it)."""
    variant, seed, settings, _ = job
    from lab.model_cache import trained_mqar

    run = run_of(variant, seed)
    model, losses = trained_mqar(run)
    return {"recall": score(model, run, settings), "final_loss": losses[-1]}


def run(settings: dict, header: dict, quick: bool) -> dict:
    names = QUICK_VARIANTS if quick else tuple(VARIANTS)
    jobs = [(v, seed, settings, BASE.steps) for v in names for seed in range(settings["seeds"])]
    if settings["long_steps"]:
        jobs += [(v, 0, settings, settings["long_steps"]) for v in settings["long_variants"]]
    work = quick_job if quick else one_job
    started = time.perf_counter()
    if settings["workers"] > 1:  # one thread each: the same sums as one after the other
        with multiprocessing.get_context("spawn").Pool(settings["workers"]) as pool:
            done = pool.map(work, jobs)
    else:
        done = [work(job) for job in jobs]
    variants = {}
    for name in names:
        runs = [
            d for (v, _, _, n), d in zip(jobs, done, strict=True) if (v, n) == (name, BASE.steps)
        ]
        longer = [
            d
            for (v, _, _, n), d in zip(jobs, done, strict=True)
            if (v, n) == (name, settings["long_steps"])
        ]
        variants[name] = {
            "attention": dict(VARIANTS[name]),
            "cached_numbers_per_token_and_layer": cached_numbers(name),
            "recall": {p: [r["recall"][p] for r in runs] for p in map(str, settings["eval_pairs"])},
            "final_loss": [r["final_loss"] for r in runs],
            "cpu_seconds": [r.get("cpu_seconds") for r in runs],
        }
        if longer:
            variants[name]["seed0_long"] = longer[0]
    note_load_after(header)
    return {
        **header,
        "settings": settings,
        "run": BASE.recipe(),
        "chance": round(1 / BASE.n_values, 4),
        "wall_seconds": round(time.perf_counter() - started, 1),
        "variants": variants,
    }


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


def costs_recall_from(data: dict, variant: str) -> int | None:
    """The fewest pairs at which every seed of `variant` recalls less than every seed
    of MHA; None if there are none."""
    mha = data["variants"]["MHA"]["recall"]
    mine = data["variants"][variant]["recall"]
    for p in data["settings"]["eval_pairs"]:
        if max(mine[str(p)]) < min(mha[str(p)]):
            return p
    return None


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
    args = cmd.parse(argv)
    settings = dict(QUICK if args.quick else FULL)
    settings["workers"] = args.jobs  # the result file's name for it
    if args.seeds is not None:
        settings["seeds"] = args.seeds
    data = run(settings, cmd.header(SCHEMA), args.quick)
    cmd.write(RESULT_FILE.name, data)
    cmd.write(FIGURE.name, recall_figure(data))
    print(table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())
