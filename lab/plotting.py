"""Every figure of the site, in one matplotlib style.

    python -m lab.plotting          # redraw every committed figure from its result file

The style: a transparent background, and ink (text, axes, ticks, guide lines) in a
mid grey, INK, with at least 3:1 contrast on Material's white page and on its dark
"slate" page (#1e2029): 3.95:1 and 4.11:1. The figures are shown in <img> tags,
which cannot inherit the page's text colour (currentColor would be black in both
schemes), so one colour has to read on both. The data colours (COLORS) are chosen
the same way. SVGs are deterministic: a fixed hash salt for the ids, no date, so
the same data gives the same bytes and a redraw shows up in git only if it changed.
"""

import html
import io
import re
import statistics
import sys
from pathlib import Path

from lab.common import RESULTS_DIR, TRAINING_RESULTS, atomic_write

INK = "#808080"  # contrast 3.95 on white, 4.11 on slate
# Series colours, each >= 3:1 on white and on slate (Okabe-Ito and kin).
COLORS = ["#3a86c8", "#D55E00", "#009E73", "#CC79A7", "#9467bd"]
HASH_SALT = "attention-guide"

STYLE = {
    "svg.hashsalt": HASH_SALT,  # ids in the SVG from the content, not at random
    "svg.fonttype": "none",  # text stays text: smaller, searchable, the page's font
    "figure.facecolor": "none",
    "axes.facecolor": "none",
    "savefig.facecolor": "none",
    "savefig.transparent": True,
    "legend.facecolor": "none",
    "legend.framealpha": 0,
    "legend.edgecolor": INK,
    "text.color": INK,
    "axes.edgecolor": INK,
    "axes.labelcolor": INK,
    "axes.titlecolor": INK,
    "xtick.color": INK,
    "ytick.color": INK,
    "grid.color": INK,
    "grid.alpha": 0.3,
    "font.family": ["sans-serif"],
    "font.size": 9,
}


def pyplot():
    """matplotlib.pyplot drawing to files only (Agg), in the site's style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    plt.rcParams.update({**STYLE, "axes.prop_cycle": cycler(color=COLORS)})
    return plt


def svg_text(fig) -> str:
    """The figure as SVG text, closed afterwards: same figure, same text."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    pyplot().close(fig)
    return buffer.getvalue()


def save_svg(fig, path: Path) -> Path:
    """svg_text(fig), written atomically to path."""
    text = svg_text(fig)
    return atomic_write(path, lambda f: f.write(text))


# ------------------------------------------------------------------ training


def loss_curve(history: dict):
    """Loss against seconds of training: the whole run and, with a known best
    loss, a close-up of the end (a history of snippets.train.train)."""
    plt = pyplot()
    records = history["records"]
    best = history.get("best_loss")
    trained = [r for r in records if "train_loss" in r]  # not the step-0 record
    fig, axes = plt.subplots(1, 2 if best is not None else 1, figsize=(8, 3.4), squeeze=False)
    for ax in axes[0]:
        ax.plot(
            [r["seconds"] for r in trained],
            [r["train_loss"] for r in trained],
            label="train (mean since last point)",
        )
        ax.plot(
            [r["seconds"] for r in records],
            [r["val_loss"] for r in records],
            label="validation",
            marker=".",
        )
        if best is not None:
            ax.axhline(best, color=INK, linestyle="--", label="entropy rate H")
            ax.axhspan(best, best + 0.1, color=INK, alpha=0.15, label="within 0.1 nats of H")
        ax.set_xlabel("seconds of training")
        ax.grid(True)
    axes[0][0].set_ylabel("loss, nats per token")
    axes[0][0].legend(fontsize="small")
    if best is not None:
        close = axes[0][1]
        close.set_ylim(best - 0.03, best + 0.12)
        close.set_title("close-up", fontsize="small")
    fig.tight_layout()
    return fig


def lr_schedule(config):
    """The learning rate of every step of a run with this TrainConfig."""
    from snippets.train import lr_at

    plt = pyplot()
    steps = range(config.steps + config.steps // 5)  # and a little past the end
    args = (config.lr, config.min_lr, config.warmup_steps, config.steps)
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.plot(list(steps), [lr_at(s, *args) for s in steps])
    ax.axvline(config.warmup_steps, color=INK, linestyle=":", label="end of warmup")
    ax.axvline(config.steps, color=INK, linestyle="--", label="last step")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


def kv_cache(data: dict):
    """Milliseconds per generated token against its position, with and without
    the cache (a result of `python -m lab.generate --bench-kv-cache`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.4))
    start = data["prompt_tokens"]
    for key, label in (("recompute", "recompute"), ("kv_cache", "KV cache")):
        if key not in data:  # --cache-only: no recomputation
            continue
        ms = data[key]["median_ms_by_position"]
        if len(ms) > 512:
            # Over thousands of tokens, single slow tokens (the machine) hide the
            # trend: a running median of 33 tokens shows it.
            ms = [statistics.median(ms[max(0, i - 16) : i + 17]) for i in range(len(ms))]
            label += " (running median of 33 tokens)"
        ax.plot(range(start + 1, start + 1 + len(ms)), ms, label=label)
    ax.set_xlabel("length of the sequence after the new token")
    ax.set_ylabel("ms for the token")
    ax.set_ylim(bottom=0)
    ax.grid(True)
    ax.legend()
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ attention cost

VARIANT_STYLE = {  # colour and marker of each implementation on the cost page
    "per-head": ("#D55E00", "o"),
    "manual": ("#CC79A7", "s"),
    "einsum": ("#3a86c8", "D"),  # 3.87:1 on white, 4.19:1 on slate
    "torch-mha": ("#9467bd", "v"),  # 4.26:1, 3.81:1
    "flex": ("#a6761d", "P"),  # 4.01:1, 4.04:1
    "sdpa": ("#009E73", "^"),
}
BUSY = 0.1  # above this share of the CPU taken by others, a time is drawn hollow


def growth_axes(ax, seq_lens: list[int], quadratic_end: float, linear_end: float) -> None:
    """Log-log axes over seq_lens (T, powers of two), with two guides in the ink colour:
    one rising like T² to end at quadratic_end, one like T to end at linear_end, so a
    reader can see which series grows like which."""
    T_end = seq_lens[-1]
    for end, exponent, dash, label in (
        (quadratic_end, 2, (6, 3), "∝ T²"),
        (linear_end, 1, (2, 2), "∝ T"),
    ):
        guide = [end * (T / T_end) ** exponent for T in seq_lens]
        ax.plot(seq_lens, guide, color=INK, linewidth=1, dashes=dash, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(seq_lens, [str(T) for T in seq_lens])
    ax.minorticks_off()
    ax.set_xlabel("sequence length T (log scale)")


def attention_cost(data: dict, what: str):
    """Time or peak memory against T, log-log, forward and forward+backward side
    by side (a result of `python -m lab.bench attention`).

    Args:
        data: the result file's content.
        what: "time" (median ms) or "memory" (peak MiB of tensors).

    Dashed guides through the largest T of the manual and the fused variant rise
    like T² and like T; markers of wall-clock times measured while other
    processes took more than BUSY of the CPU are hollow.
    """
    from lab.bench import MODE_LABELS, MODES, VARIANT_LABELS, describe_settings, lookup

    if what not in ("time", "memory"):
        raise ValueError(f"what ({what!r}) must be 'time' or 'memory'")
    plt = pyplot()
    n_head = data["settings"]["plot_heads"]
    seq_lens = data["settings"]["seq_lens"]
    key, scale = ("median_ms", 1.0) if what == "time" else ("peak_bytes", 2.0**-20)
    cpu_clock = data["settings"].get("clock") == "cpu"
    busy = set()
    # CPU time does not count waiting for a core: a busy machine does not inflate it.
    if what == "time" and not cpu_clock:
        for T in seq_lens:
            share = lookup(data, "sdpa", n_head, T).get("others_cpu_share")
            if share is not None and share > BUSY:
                busy.add(T)
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.8), sharey=True)
    low = float("inf")  # the lowest measured value: the guides may run far below it
    for ax, mode in zip(axes, MODES, strict=True):
        series = {}
        for variant, (color, marker) in VARIANT_STYLE.items():
            if variant not in data["variants"]:
                continue
            cells = [lookup(data, variant, n_head, T)[mode] for T in seq_lens]
            if any(cell is None for cell in cells):  # FlexAttention: no backward on CPU
                continue
            ys = [cell[key] * scale for cell in cells]
            series[variant] = ys
            low = min(low, *ys)
            filled = [i for i, T in enumerate(seq_lens) if T not in busy]
            ax.plot(
                seq_lens,
                ys,
                color=color,
                linewidth=1.8,
                marker=marker,
                markersize=5,
                markevery=filled,
                label=VARIANT_LABELS[variant],
            )
            hollow = [(T, y) for T, y in zip(seq_lens, ys, strict=True) if T in busy]
            if hollow:  # measured while the machine was busy
                ax.plot(
                    *zip(*hollow, strict=True),
                    linestyle="none",
                    marker=marker,
                    markersize=5,
                    color=color,
                    markerfacecolor="none",
                )
        growth_axes(ax, seq_lens, series["manual"][-1], series["sdpa"][-1])
        ax.set_title(MODE_LABELS[mode])
        ax.grid(True, which="major")
    axes[0].set_ylim(bottom=low / 2)
    ylabel = "peak MiB of tensors"
    if what == "time":
        ylabel = "CPU milliseconds per run" if cpu_clock else "milliseconds per run"
    axes[0].set_ylabel(f"{ylabel} (log scale)")
    title = "Time" if what == "time" else "Peak memory"
    setting = f"H={n_head}, " + describe_settings(data).split(";")[0]
    fig.suptitle(f"{title} vs sequence length ({setting})")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=8, bbox_to_anchor=(0.5, 0.94))
    fig.tight_layout(rect=(0, 0, 1, 0.87))
    return fig


# ------------------------------------------------------------------ positions


def sinusoidal_table(T: int = 64, C: int = 64):
    """The sinusoidal position table (snippets.positions), channels against positions."""
    from snippets.positions import sinusoidal_positions

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    table = sinusoidal_positions(T, C).T.numpy()  # (C, T): positions along x
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position t")
    ax.set_ylabel("channel")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def rope_rotation(D: int = 16, positions: int = 12):
    """One vector at positions 0 .. positions - 1: three of its RoPE pairs turning on
    the unit circle, each at its own speed."""
    import math

    import torch

    from snippets.positions import apply_rope, rope_frequencies

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 4.4))
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
    ax.legend(fontsize="small", loc="center")
    fig.tight_layout()
    return fig


def alibi_biases(n_head: int = 8, T: int = 16):
    """The bias ALiBi adds to a score, against the distance back, one line per head."""
    from snippets.positions import alibi_bias, alibi_slopes

    plt = pyplot()
    bias = alibi_bias(n_head, T)[:, -1].flip(-1).numpy()  # (H, T): last query, distance 0..
    slopes = alibi_slopes(n_head).tolist()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for h in range(n_head):
        style = "-" if h < len(COLORS) else "--"  # more heads than colours
        label = f"head {h}: slope 1/{round(1 / slopes[h])}"
        ax.plot(range(T), bias[h], style, label=label)
    ax.set_xlabel("distance i - j back from the query")
    ax.set_ylabel("bias added to the score")
    ax.grid(True)
    ax.legend(fontsize="x-small", ncol=2)
    fig.tight_layout()
    return fig


def learned_similarity(data: dict):
    """Cosine similarity of the trained "learned" position vectors, position against
    position (a result of `python -m lab.positions`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(4.4, 3.8))
    image = ax.imshow(data["learned_similarity"], cmap="RdBu_r", vmin=-1, vmax=1)
    ax.set_xlabel("position")
    ax.set_ylabel("position")
    fig.colorbar(image, ax=ax, label="cosine similarity")
    fig.tight_layout()
    return fig


def position_copy_loss(data: dict):
    """Loss on the copies of each position scheme at 1x, 2x, 4x the training length,
    mean over seeds with the min-max spread (a result of `python -m lab.positions`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for row in data["rows"]:
        factors = [f for f in data["factors"] if row[f"loss_{f}x"] is not None]
        cells = [row[f"loss_{f}x"] for f in factors]
        mean = [c["mean"] for c in cells]
        low = [c["mean"] - c["min"] for c in cells]
        high = [c["max"] - c["mean"] for c in cells]
        ax.errorbar(factors, mean, yerr=[low, high], marker="o", capsize=3, label=row["position"])
    ax.axhline(data["floor_on_copies"], color=INK, linestyle="--", label="floor (a perfect copier)")
    ax.set_xscale("log", base=2)
    ax.set_xticks(data["factors"], [f"{f}x" for f in data["factors"]])
    ax.minorticks_off()
    ax.set_xlabel("evaluation length / training length")
    ax.set_ylabel("loss on the copies, nats")
    ax.grid(True)
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ notebook


def heatmap(ax, weights, tokens, title: str) -> None:
    """One head's (T, T) attention weights: row = query, column = key. Masked
    cells stay empty, a line follows the edge of the causal mask; tokens may be
    None (no tick labels)."""
    import torch

    T = weights.size(-1)
    shown = weights.masked_fill(~torch.ones(T, T).tril().bool(), float("nan"))
    ax.imshow(shown, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    edge = torch.arange(T + 1) - 0.5
    ax.step(edge, edge, where="post", color=INK, linewidth=0.6)
    ax.set_title(title, fontsize=9)
    if tokens is None:
        ax.set_xticks([])
        ax.set_yticks([])
    else:
        ax.set_xticks(range(T), tokens, fontsize=7, family="monospace")
        ax.set_yticks(range(T), tokens, fontsize=7, family="monospace")
    ax.tick_params(length=0, pad=1)
    for side in ax.spines.values():
        side.set_visible(False)


def mask_image(ax, mask, labels: list[str], title: str) -> None:
    """A (T, T) bool attention mask: allowed cells filled, blocked cells left
    transparent (the page shows through, light or dark), a grid of INK lines."""
    import torch
    from matplotlib.colors import ListedColormap

    T = mask.size(-1)
    shown = mask.float().masked_fill(~mask.bool(), float("nan"))  # blocked: no paint
    ax.imshow(shown, cmap=ListedColormap([COLORS[0]]), vmin=0, vmax=1)
    edges = torch.arange(T + 1) - 0.5
    ax.hlines(edges, -0.5, T - 0.5, color=INK, linewidth=0.5, alpha=0.6)
    ax.vlines(edges, -0.5, T - 0.5, color=INK, linewidth=0.5, alpha=0.6)
    ax.set_title(title, fontsize=9)
    ax.set_xticks(range(T), labels, fontsize=7, rotation=90)
    ax.set_yticks(range(T), labels, fontsize=7)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)


_figures = iter(range(1, 10_000))  # numbers that keep each inlined figure's ids apart


def inline_svg(fig, description: str) -> str:
    """The figure as an <svg> element to put inside a page (the notebook's).

    Several figures share one page: only the ids something refers to are kept
    (clip paths), each renamed for this figure, and the figure's CSS is scoped
    to it. description becomes the aria-label, for screen readers.
    """
    svg = svg_text(fig)
    svg = svg[svg.index("<svg ") :]
    name = f"figure-{next(_figures)}"
    used = set(re.findall(r'(?:href="#|url[(]#)([^")]+)', svg))
    svg = re.sub(r' id="([^"]+)"', lambda m: f' id="{name}-{m[1]}"' if m[1] in used else "", svg)
    svg = re.sub(r'(href="#|url[(]#)([^")]+)', rf"\g<1>{name}-\g<2>", svg)
    svg = svg.replace("*{", f"#{name} *{{")
    attributes = (
        f'id="{name}" role="img" aria-label="{html.escape(description)}" '
        f'style="max-width: 100%; height: auto"'
    )
    return svg.replace("<svg ", f"<svg {attributes} ", 1)


# ------------------------------------------------------------------ the committed figures


def committed_figures() -> dict[Path, object]:
    """Each committed figure's path -> a function drawing it from committed data."""
    import json

    def load(path: Path) -> dict:
        return json.loads(path.read_text(encoding="utf-8"))

    def schedule():
        from snippets.train import TrainConfig

        return lr_schedule(TrainConfig())

    def mask_figures() -> dict:
        from lab import masks  # drawn there, in this style: the masks page's figures

        figures = {masks.COST_PLOT: lambda: masks.cost_plot(load(masks.COST_FILE))}
        for stem, (title, mask) in masks.FIGURES.items():
            figures[masks.figure_path(stem)] = lambda t=title, m=mask: masks.mask_figure(m(), t)
        return figures

    cost = RESULTS_DIR / "attention-cost.json"
    positions = RESULTS_DIR / "positions.json"
    return {
        RESULTS_DIR / "attention-cost-time.svg": lambda: attention_cost(load(cost), "time"),
        RESULTS_DIR / "attention-cost-memory.svg": lambda: attention_cost(load(cost), "memory"),
        TRAINING_RESULTS / "schedule.svg": schedule,
        TRAINING_RESULTS / "markov-loss.svg": lambda: loss_curve(
            load(TRAINING_RESULTS / "markov.json")
        ),
        TRAINING_RESULTS / "kv-cache.svg": lambda: kv_cache(
            load(TRAINING_RESULTS / "kv-cache.json")
        ),
        RESULTS_DIR / "positions-sinusoidal.svg": sinusoidal_table,
        RESULTS_DIR / "positions-rope.svg": rope_rotation,
        RESULTS_DIR / "positions-alibi.svg": alibi_biases,
        RESULTS_DIR / "positions-learned.svg": lambda: learned_similarity(load(positions)),
        RESULTS_DIR / "positions-excess.svg": lambda: position_copy_loss(load(positions)),
        **mask_figures(),
    }


def main(argv: list[str] | None = None) -> int:
    """Redraw every committed figure from the committed result files."""
    argv = sys.argv[1:] if argv is None else argv
    if argv:
        raise SystemExit("usage: python -m lab.plotting   (redraws every committed figure)")
    for path, draw in committed_figures().items():
        save_svg(draw(), path)
        print(f"wrote {path.relative_to(RESULTS_DIR.parents[2])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
