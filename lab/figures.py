"""Every committed figure of the site, redrawn from committed data.

    python -m lab.figures          # redraw them all; `git diff` then shows what changed

Each experiment draws its own figures in the one style (lab/shared/style.py); this is
the one list of the committed ones, each with the function and data it is drawn
from. The same data gives the same bytes: a redraw that changes nothing leaves git clean.
"""

import json
import sys
from pathlib import Path

from lab import (
    context_extension,
    generate,
    kv_heads_recall,
    masks,
    optimization,
    positions,
    streaming,
    taming_softmax,
    train,
)
from lab.parts import attention_cost_tables, serving_page
from lab.shared.paths import RESULTS_DIR, ROOT, TRAINING_RESULTS
from lab.shared.style import save_svg
from snippets.run.train import TrainConfig


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def committed_figures() -> dict[Path, object]:
    """Each committed figure's path -> a function of no arguments drawing it."""
    cost = RESULTS_DIR / "attention-cost.json"
    pos = RESULTS_DIR / "positions.json"
    figures = {
        RESULTS_DIR / "attention-cost-time.svg": lambda: attention_cost_tables.cost_figure(
            load(cost), "time"
        ),
        RESULTS_DIR / "attention-cost-memory.svg": lambda: attention_cost_tables.cost_figure(
            load(cost), "memory"
        ),
        TRAINING_RESULTS / "schedule.svg": lambda: train.lr_schedule(TrainConfig()),
        TRAINING_RESULTS / "markov-loss.svg": lambda: train.loss_curve(
            load(TRAINING_RESULTS / "markov.json")
        ),
    }
    figures[optimization.FIGURE] = lambda: optimization.loss_figure(load(optimization.RESULT_FILE))
    for name in ("kv-cache", "kv-cache-long"):
        figures[TRAINING_RESULTS / f"{name}.svg"] = lambda n=name: generate.kv_cache_figure(
            load(TRAINING_RESULTS / f"{n}.json")
        )
    for name, draw in positions.FIGURES.items():
        figures[RESULTS_DIR / name] = lambda draw=draw: draw(load(pos))
    for name, draw in kv_heads_recall.FIGURES.items():
        figures[RESULTS_DIR / name] = lambda draw=draw: draw(load(kv_heads_recall.RESULT_FILE))
    figures[masks.COST_PLOT] = lambda: masks.cost_plot(load(masks.COST_FILE))
    # Drawn from the rules themselves, not from a result.
    figures[RESULTS_DIR / context_extension.FIGURE] = context_extension.frequencies_figure
    for stem, (title, mask) in masks.FIGURES.items():
        figures[masks.figure_path(stem)] = lambda t=title, m=mask: masks.mask_figure(m(), t)
    from lab import beyond_softmax  # imports lab.figures' neighbours only when drawn

    figures.update(beyond_softmax.figures())
    figures[streaming.PLOT_FILE] = lambda: streaming.sink_plot(load(streaming.RESULT_FILE))
    figures[taming_softmax.GROWTH_PLOT] = lambda: taming_softmax.growth_plot(
        load(taming_softmax.GROWTH_FILE)
    )
    from lab import todays_cost

    figures[todays_cost.FIGURE] = lambda: todays_cost.figure(load(todays_cost.RESULT_FILE))
    from lab import attention_figures

    figures[attention_figures.ONE_HEAD_FIGURE] = attention_figures.one_head_figure
    figures[attention_figures.HEAD_SPLIT_FIGURE] = attention_figures.head_split_figure
    figures[serving_page.FIGURE] = lambda: serving_page.speculative_figure(
        load(serving_page.RESULT_FILE)
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    """Redraw every committed figure from the committed result files."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        raise SystemExit("usage: python -m lab.figures   (redraws every committed figure)")
    for path, draw in committed_figures().items():
        save_svg(draw(), path)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
