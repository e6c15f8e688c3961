"""The optimization page's headline run: the page's GPT learning to copy, whose loss
sits on a plateau until an induction head forms, then drops (Olsson et al. 2022).

    python -m lab.optimization            # docs/assets/results/training/induction.json + SVG
    python -m lab.optimization --quick    # seconds: the suite's run (test-artifacts/)

The model is the guide's GPT (learned positions, snippets/core/model.py, its own
initialisation) trained with the page's loop (make_optimizer, lr_at, fit)
on rows of a repeated random segment (snippets/pages/tasks.py), three seeds. Every few
steps, on held-out rows: the loss over all targets beside its floor (copy_floor:
the first segment is random and costs, the repeats cost nothing), the loss on the
copies (floor 0), and every head's previous-token and induction scores
(lab/recipes/copy_training.py).
"""

import dataclasses
import json
import math
import sys

from lab.recipes.copy_training import (
    INDUCTION_THRESHOLD,
    PREVIOUS_THRESHOLD,
    Setup,
    train_one,
    uniform_scores,
)
from lab.shared.common import TRAINING_RESULTS
from lab.shared.experiment import Command, progress
from lab.shared.result_pages import from_text, markdown_table, measured_note, value_table
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot
from snippets.pages.tasks import copy_floor

RESULT_FILE = TRAINING_RESULTS / "induction.json"
FIGURE = TRAINING_RESULTS / "induction-loss.svg"
SCHEMA = "attention-guide/induction-run/1"

FULL = Setup(steps=400, every=10, token_std=0.02, factors=(1,), seeds=(0, 1, 2))
# The same model and task, a shorter run: the drop comes at 150-200 steps.
QUICK = dataclasses.replace(FULL, steps=250, every=25, seeds=(0,))


def best(point: dict, key: str, layer: int) -> float:
    """The largest score of a head of `layer` (counted from 1) at one measurement."""
    return max(point[key][layer - 1])


def run(setup: Setup, header: dict) -> dict:
    runs = []
    for seed in setup.seeds:
        progress(f"seed {seed}")
        row, _ = train_one(setup, "learned", seed)
        runs.append(row)
    result = dict(header)
    result.update(
        setup={
            **dataclasses.asdict(setup),
            "schemes": ["learned"],
            "seeds": list(setup.seeds),
            "factors": list(setup.factors),
        },
        chance=round(math.log(setup.vocab_size), 4),
        floor_all_targets=round(
            copy_floor(setup.context_length, setup.vocab_size, setup.min_period, setup.max_period),
            4,
        ),
        floor_on_copies=0.0,
        thresholds={"previous": PREVIOUS_THRESHOLD, "induction": INDUCTION_THRESHOLD},
        uniform_scores=uniform_scores(setup),
        runs=runs,
    )
    return result


def loss_figure(data: dict):
    """Held-out loss against steps, its floor, and the induction score of layer 2's
    best head on a second axis: seed 0 drawn, the other seeds thin."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 4.4))
    score_ax = ax.twinx()
    for i, run_ in enumerate(data["runs"]):
        first = i == 0
        steps = [p["step"] for p in run_["curve"]]
        ax.plot(
            steps,
            [p["loss_all"] for p in run_["curve"]],
            color=COLORS[0],
            linewidth=1.6 if first else 0.7,
            alpha=1 if first else 0.5,
            label="loss, all targets (seed 0; thin: seeds 1, 2)" if first else None,
        )
        score_ax.plot(
            steps,
            [best(p, "induction", 2) for p in run_["curve"]],
            color=COLORS[1],
            linestyle="-" if first else ":",
            linewidth=1.4 if first else 0.7,
            label="induction score, layer 2's best head" if first else None,
        )
    ax.axhline(data["floor_all_targets"], color=INK, linestyle="--", label="floor: copy_floor")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out loss, nats per token")
    ax.set_ylim(0, data["chance"] * 1.05)
    score_ax.set_ylim(0, 1)
    score_ax.set_ylabel("induction score")
    ax.grid(True)
    lines = ax.get_legend_handles_labels()
    more = score_ax.get_legend_handles_labels()
    below = {"loc": "upper center", "bbox_to_anchor": (0.5, -0.2)}  # off the curves
    ax.legend(lines[0] + more[0], lines[1] + more[1], **below)
    fig.tight_layout()
    return fig


def table(data: dict, shown=(0, 50, 100, 150, 200, 250, 300, 400)) -> str:
    """Seed 0's curve at some steps: the losses and the two heads' scores."""
    lines = [f"{'step':>5} {'loss':>6} {'- floor':>8} {'copies':>7} {'share L1':>9} {'ind L2':>7}"]
    floor = data["floor_all_targets"]
    by_step = {p["step"]: p for p in data["runs"][0]["curve"]}
    for step in shown:
        if step not in by_step:
            continue
        p = by_step[step]
        lines.append(
            f"{step:>5} {p['loss_all']:>6.2f} {p['loss_all'] - floor:>+8.2f} "
            f"{p['loss_copies']:>7.2f} {best(p, 'previous', 1):>9.2f} "
            f"{best(p, 'induction', 2):>7.2f}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    cmd = Command("lab.optimization", __doc__, threads=1, out=TRAINING_RESULTS)
    args = cmd.parse(argv)
    setup = QUICK if args.quick else FULL
    result = run(setup, cmd.header(SCHEMA))
    cmd.write(RESULT_FILE.name, result)
    cmd.write(FIGURE.name, loss_figure(result))
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the optimization page
# Rendered into docs/optimization.md by the build (hooks/results.py) from RESULT_FILE.


def induction_result() -> str:
    """Seed 0's curve, each seed's induction head, and how the runs were made."""
    data = json.loads(RESULT_FILE.read_text(encoding="utf-8"))
    rows = []
    for r in data["runs"]:
        f = r["induction_formed"]
        curve = {p["step"]: p for p in r["curve"]}
        before, after = curve[f["step"] - 50]["loss_all"], curve[f["step"] + 50]["loss_all"]
        end = r["curve"][-1]["loss_all"] - data["floor_all_targets"]
        rows.append(
            [str(r["seed"]), f"L{f['layer']}.{f['head']}", str(f["step"]), f"{before:.2f}",
             f"{after:.2f}", f"{end:+.3f}"]
        )  # fmt: skip
    header = ["seed", "induction head", "at step", "loss 50 before", "50 after", "end - floor"]
    s = data["setup"]
    note = measured_note(
        data,
        [
            f"{s['n_layer']} blocks, C={s['n_embed']}, H={s['n_head']}, V={s['vocab_size']},"
            f" T={s['context_length']}, periods {s['min_period']}-{s['max_period']},"
            f" {s['steps']} steps of {s['batch_size']} rows, lr {s['lr']}",
        ],
        seeds=s["seeds"],
    )
    title = "seed 0 (loss and '- floor': all targets; copies: the repeats only)"
    return f"{from_text(title + chr(10) + table(data))}\n\n{markdown_table(header, rows)}\n\n{note}"


def induction_values() -> dict[str, str]:
    data = json.loads(RESULT_FILE.read_text(encoding="utf-8"))
    return value_table(
        {
            "chance": f"{data['chance']:.2f}",
            "floor": f"{data['floor_all_targets']:.3f}",
            "uniform": f"{data['uniform_scores']['induction']:.2f}",
            "threshold": str(data["thresholds"]["induction"]),
        }
    )
