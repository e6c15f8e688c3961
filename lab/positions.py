"""Five position schemes on the copy / induction task: the positions page's experiment.

    python -m lab.positions            # writes docs/assets/results/positions.json + SVGs
    python -m lab.positions --quick --out /tmp/positions   # seconds: the suite's run

The same small GPT is trained with each scheme of snippets/core/positions.py (same seeds,
steps, sizes, batches) on rows of a random segment repeated until full
(snippets/pages/tasks.py, periods 4-16): once a repeat has begun, each next token is the
one that followed the current token's earlier occurrence, which only attention can
fetch. Rows 1x, 2x and 4x the training length, with segments repeating across it,
are scored on the targets a perfect copier knows (floor 0 nats). Every few steps,
layer 1's attention to the previous token is measured: the step where some head
gives it half its weight is when the previous-token head of the induction circuit
(Olsson et al. 2022) has formed.
"""

import dataclasses
import json
import math
import multiprocessing
import statistics
import sys

import torch

from lab.recipes.copy_training import (
    INDUCTION_THRESHOLD,
    PREVIOUS_THRESHOLD,
    Setup,
    train_one,
    uniform_scores,
)
from lab.shared.common import RESULTS_DIR
from lab.shared.experiment import Command, progress
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot
from snippets.core.model import GPT
from snippets.core.positions import (
    POSITIONS,
    alibi_bias,
    alibi_slopes,
    apply_rope,
    rope_frequencies,
    sinusoidal_positions,
)
from snippets.pages.tasks import copy_floor

RESULT_FILE = RESULTS_DIR / "positions.json"
SCHEMA = "attention-guide/positions/3"

FULL = Setup(n_layer=3, steps=800, lr=5e-3, schemes=POSITIONS)
QUICK = Setup(
    context_length=16,
    vocab_size=8,
    min_period=2,
    max_period=5,
    n_layer=2,
    n_head=4,
    n_embed=32,
    steps=400,
    batch_size=16,
    lr=1e-2,
    min_lr=1e-3,
    warmup_steps=10,
    every=50,
    eval_rows=32,
    probe_period=4,
    schemes=("sinusoidal", "alibi"),
    seeds=(0,),
)


def learned_similarity(model: GPT) -> list[list[float]]:
    """Cosine similarity of the learned position vectors, position against position."""
    table = model.pos_emb.weight.detach()  # (T, C)
    unit = table / table.norm(dim=1, keepdim=True)
    return [[round(x, 3) for x in row] for row in (unit @ unit.T).tolist()]  # (T, T)


def _train(job):
    setup, position, seed = job
    row, model = train_one(setup, position, seed)
    first = position == "learned" and seed == setup.seeds[0]
    return row, learned_similarity(model) if first else None


def summary(rows_: list[dict], schemes, factors) -> list[dict]:
    """Per scheme: mean, min and max over the seeds of each number of the table."""
    out = []
    for position in schemes:
        mine = [r for r in rows_ if r["position"] == position]
        entry = {"position": position, "seeds": len(mine), "parameters": mine[0]["parameters"]}
        for key in [f"{k}_{f}x" for f in factors for k in ("loss", "accuracy")]:
            values = [r[key] for r in mine]
            if None in values:
                entry[key] = None
                continue
            entry[key] = {
                "mean": round(statistics.fmean(values), 4),
                "min": min(values),
                "max": max(values),
            }
        for key in ("previous_formed", "induction_formed"):
            entry[key] = [r[key] for r in mine]  # per seed; None: not within the run
        out.append(entry)
    return out


def run(setup: Setup, header: dict, processes: int = 2) -> dict:
    """Train and score every scheme and seed; the content of the result file."""
    jobs = [(setup, p, s) for p in setup.schemes for s in setup.seeds]
    progress(f"training {len(jobs)} models in {processes} processes")
    if processes > 1:
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            results = pool.map(_train, jobs)
    else:
        results = [_train(job) for job in jobs]
    runs = [row for row, _ in results]
    tables = [table for _, table in results if table is not None]
    result = dict(header)
    result.update(
        setup={
            **dataclasses.asdict(setup),
            "schemes": list(setup.schemes),
            "seeds": list(setup.seeds),
            "factors": list(setup.factors),
        },
        floor_on_copies=0.0,
        floor_all_targets=round(
            copy_floor(setup.context_length, setup.vocab_size, setup.min_period, setup.max_period),
            4,
        ),
        thresholds={"previous": PREVIOUS_THRESHOLD, "induction": INDUCTION_THRESHOLD},
        uniform_scores=uniform_scores(setup),
        factors=list(setup.factors),
        rows=summary(runs, setup.schemes, setup.factors),
        runs=runs,
        learned_similarity=tables[0] if tables else None,
    )
    return result


# ------------------------------------------------------------------ figures


def sinusoidal_figure(T: int = 64, C: int = 64):
    """The sinusoidal position table (snippets.core.positions), channels against positions."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.2))
    table = sinusoidal_positions(T, C).T.numpy()  # (C, T): positions along x
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position t")
    ax.set_ylabel("channel")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def rope_figure(D: int = 16, positions: int = 12):
    """One vector at positions 0 .. positions - 1: three of its RoPE pairs turning on
    the unit circle, each at its own speed."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.4))
    circle = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(circle.cos().numpy(), circle.sin().numpy(), color=INK, linewidth=0.6)
    x = torch.zeros(positions, D)
    x[:, 0::2] = 1.0  # every pair starts at (1, 0)
    y = apply_rope(x).numpy()  # row t: the vector at position t
    theta = rope_frequencies(D).tolist()
    for i in (0, 1, 2):
        label = f"pair {i}: {theta[i]:.3g} rad per position"
        ax.plot(y[:, 2 * i], y[:, 2 * i + 1], "o", markersize=4, label=label)
    for t in range(7):  # pair 0 turns one radian per position: number its first points
        ax.annotate(f"{t}", (y[t, 0] * 1.12, y[t, 1] * 1.12), ha="center", va="center")
    ax.set_aspect("equal")
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.35, 1.35)
    ax.set_xlabel("channel 2i")
    ax.set_ylabel("channel 2i + 1")
    ax.legend(loc="center")
    fig.tight_layout()
    return fig


def alibi_figure(n_head: int = 8, T: int = 16):
    """The bias ALiBi adds to a score, against the distance back, one line per head."""
    plt = pyplot(FIGURE_WIDTH)
    bias = alibi_bias(n_head, T)[:, -1].flip(-1).numpy()  # (H, T): last query, distance 0..
    slopes = alibi_slopes(n_head).tolist()
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.4))
    for h in range(n_head):
        style = "-" if h < len(COLORS) else "--"  # more heads than colours
        label = f"head {h}: slope 1/{round(1 / slopes[h])}"
        ax.plot(range(T), bias[h], style, label=label)
    ax.set_xlabel("distance i - j back from the query")
    ax.set_ylabel("bias added to the score")
    ax.grid(True)
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.22))  # below: off the lines
    fig.tight_layout()
    return fig


def learned_figure(data: dict):
    """Cosine similarity of the trained "learned" position vectors, position against
    position (a result of `python -m lab.positions`)."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(4.4, 3.8))
    image = ax.imshow(data["learned_similarity"], cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position")
    ax.set_ylabel("position")
    fig.colorbar(image, ax=ax, label="cosine similarity")
    fig.tight_layout()
    return fig


def excess_figure(data: dict):
    """Loss on the copies of each position scheme at 1x, 2x, 4x the training length,
    mean over seeds with the min-max spread (a result of `python -m lab.positions`)."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.2))
    for row in data["rows"]:
        factors = [f for f in data["factors"] if row[f"loss_{f}x"] is not None]
        cells = [row[f"loss_{f}x"] for f in factors]
        mean = [c["mean"] for c in cells]
        spread = [[c["mean"] - c["min"] for c in cells], [c["max"] - c["mean"] for c in cells]]
        ax.errorbar(factors, mean, yerr=spread, marker="o", capsize=3, label=row["position"])
    ax.axhline(data["floor_on_copies"], color=INK, linestyle="--", label="floor: a perfect copier")
    ax.set_xscale("log", base=2)
    ax.set_xticks(data["factors"], [f"{f}x" for f in data["factors"]])
    ax.minorticks_off()
    ax.set_xlabel("evaluation length / training length")
    ax.set_ylabel("loss on the copies, nats")
    ax.grid(True)
    ax.legend(ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.22))
    fig.tight_layout()
    return fig


FIGURES = {  # file name -> the function drawing it from a result
    "positions-sinusoidal.svg": lambda result: sinusoidal_figure(),
    "positions-rope.svg": lambda result: rope_figure(),
    "positions-alibi.svg": lambda result: alibi_figure(),
    "positions-learned.svg": learned_figure,
    "positions-excess.svg": excess_figure,
}


# ------------------------------------------------------------------ command


def cell(entry) -> str:
    if entry is None:
        return "cannot run"
    return f"{entry['mean']:.2f} ({entry['min']:.2f}-{entry['max']:.2f})"


def formed(entry) -> str:
    """A head's formation, for the table: step (layer.head), or "-" if not within the run."""
    return "-" if entry is None else f"{entry['step']} (L{entry['layer']}.{entry['head']})"


def table(result: dict) -> str:
    """The Markdown table of the page: loss on the copies, mean (min-max) over seeds,
    and per seed the step (layer.head) at which each head formed."""
    head = ["scheme"] + [f"loss at {f}x" for f in result["factors"]]
    head += ["previous-token head at", "induction head at"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in result["rows"]:
        cells = [row["position"]] + [cell(row[f"loss_{f}x"]) for f in result["factors"]]
        for key in ("previous_formed", "induction_formed"):
            cells.append(", ".join(formed(e) for e in row[key]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    # One thread by default: the same sums in the same order on every machine.
    cmd = Command("lab.positions", __doc__, threads=1, jobs=2)
    args = cmd.parse(argv)
    setup = QUICK if args.quick else FULL
    result = run(setup, cmd.header(SCHEMA), args.jobs)
    cmd.write(RESULT_FILE.name, result)
    for name, draw in FIGURES.items():
        if name != "positions-learned.svg" or result["learned_similarity"] is not None:
            cmd.write(name, draw(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/positions-measured.md by the build (hooks/results.py).


def _result() -> dict:
    return json.loads(RESULT_FILE.read_text(encoding="utf-8"))


def result_table() -> str:
    """The five schemes' table and how the runs were made."""
    from lab.shared.result_pages import measured_note

    result = _result()
    s, m = result["setup"], result["machine"]
    rows = {r["position"]: r for r in result["rows"]}
    note = measured_note(
        result,
        [
            f"{s['n_layer']} blocks, C={s['n_embed']}, H={s['n_head']}, V={s['vocab_size']},"
            f" trained at T={s['context_length']}, {s['steps']} steps of {s['batch_size']} rows,"
            f" lr {s['lr']}, token vectors of std {s['token_std']}",
            f"{m['torch_threads']} thread per process;"
            f" {rows['learned']['parameters']:,} parameters with the learned table,"
            f" {rows['none']['parameters']:,} without",
        ],
        seeds=s["seeds"],
    )
    return f"{table(result)}\n\n{note}"


def _rise() -> tuple[dict, dict, dict]:
    result = _result()
    rows = {r["position"]: r for r in result["rows"]}
    at = {p: {f: (r[f"loss_{f}x"] or {}).get("mean") for f in (1, 2, 4)} for p, r in rows.items()}
    rise = {p: at[p][4] - at[p][1] for p in rows if at[p][4] is not None}
    return rows, at, rise


def checks_result() -> str:
    """Predicted beside measured: each check of the page, from the same file."""
    from lab.shared.result_pages import markdown_table

    result = _result()
    rows, at, rise = _rise()
    none, sin = rows["none"]["loss_4x"], rows["sinusoidal"]["loss_4x"]
    chance = math.log(result["setup"]["vocab_size"])
    checks = [
        (f"every scheme learned at 1x (below 0.2 nats on the copies, chance {chance:.2f})",
         all(r["loss_1x"]["max"] < 0.2 for r in rows.values())),
        ("ALiBi at 4x within 0.02 nats of its 1x", abs(rise["alibi"]) < 0.02),
        ("sinusoidal rises more than ALiBi", rise["sinusoidal"] > rise["alibi"]),
        ("RoPE at 4x above its 1x", rise["rope"] > 0),
        ("none rises less than sinusoidal", rise["none"] < rise["sinusoidal"]),
        ("none rises less than RoPE", rise["none"] < rise["rope"]),
        ("none and sinusoidal at 4x, seeds' ranges overlap",
         none["min"] < sin["max"] and sin["min"] < none["max"]),
        ("none below ALiBi at 4x", at["none"][4] < at["alibi"][4]),
    ]  # fmt: skip
    rises = markdown_table(
        ["rise from 1x to 4x, nats", *rise], [["", *(f"{v:+.3f}" for v in rise.values())]]
    )
    verdicts = markdown_table(
        ["check", "holds"], [[what, "yes" if ok else "no"] for what, ok in checks]
    )
    return f"{rises}\n\n{verdicts}"


def curves_result() -> str:
    """Seed 0's curve per scheme: loss on the copies, best previous-token share, best
    induction score (of layer 2 and later), every 100 steps to 400 and at the end."""
    from lab.shared.result_pages import markdown_table

    result = _result()
    s = result["setup"]
    shown = (0, 100, 200, 300, 400, s["steps"])
    rows = []
    for r in result["runs"]:
        if r["seed"] == s["seeds"][0]:
            by_step = {c["step"]: c for c in r["curve"]}
            rows.append(
                [r["position"]]
                + [
                    f"{by_step[t]['loss_copies']:.2f} / {max(map(max, by_step[t]['previous'])):.2f}"
                    f" / {max(map(max, by_step[t]['induction'][1:])):.2f}"
                    for t in shown
                ]
            )
    header = ["step: loss / previous / induction", *map(str, shown)]
    return markdown_table(header, rows)


def similarity_result() -> str:
    """The learned position table's cosine similarities, by distance and by block."""
    from lab.shared.result_pages import markdown_table

    result = _result()
    similarity = result["learned_similarity"]  # (T, T)
    T, P = len(similarity), result["setup"]["max_period"]
    by_distance = [
        [str(d), f"{sum(similarity[t][t + d] for t in range(T - d)) / (T - d):+.2f}"]
        for d in (1, 2, 4, 16)
    ]

    def block(a, b):
        pairs = [(i, j) for i in a for j in b if i != j]
        return sum(similarity[i][j] for i, j in pairs) / len(pairs)

    first, later = range(1, P), range(P, T)
    blocks = [
        [f"positions 1-{P - 1}, among themselves", f"{block(first, first):+.2f}"],
        [f"positions {P}-{T - 1}, among themselves", f"{block(later, later):+.2f}"],
        ["one against the other", f"{block(first, later):+.2f}"],
    ]
    return (
        markdown_table(["positions apart", "mean cosine similarity"], by_distance)
        + "\n\n"
        + markdown_table(["", "mean cosine similarity"], blocks)
    )


def values() -> dict[str, str]:
    from lab.shared.result_pages import value_table

    result = _result()
    return value_table(
        {
            "floor": f"{result['floor_all_targets']:.3f}",
            "uniform_previous": f"{result['uniform_scores']['previous']:.2f}",
            "uniform_induction": f"{result['uniform_scores']['induction']:.3f}",
            "threshold": str(result["thresholds"]["induction"]),
        }
    )
