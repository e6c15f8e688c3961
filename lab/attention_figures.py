"""The attention pages' two pictures, drawn from the rules, not from a result.

- one_head_figure(): the data flow of one causal head on the first page's worked
  example (4 tokens, C = 3, D = 2): X, its three projections, the scores with the
  future masked, the weights, the output. The numbers are the example's own,
  computed here from EXAMPLE with the lesson's scaled_dot_product_attention.
- head_split_figure(): (B, T, C) -> (B, T, H, D) -> (B, H, T, D) for one sequence,
  the channels coloured by the head they belong to.

`python -m lab.figures` redraws both (they are in its list).
"""

import torch

from lab.shared.common import RESULTS_DIR
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot
from snippets.core.masks import causal_mask
from snippets.lessons.attention import scaled_dot_product_attention

ONE_HEAD_FIGURE = RESULTS_DIR / "attention-one-head.svg"
HEAD_SPLIT_FIGURE = RESULTS_DIR / "attention-head-split.svg"

# The worked example of the attention page: 4 tokens of C = 3 channels, D = 2.
EXAMPLE = {
    "X": [[1, 0, 1], [0, 2, 0], [1, 1, 0], [0, 1, 1]],
    "W_Q": [[1, 0], [0, 1], [2, 0]],
    "W_K": [[1, 0], [0, 1], [0, 1]],
    "W_V": [[2, 0], [0, 1], [0, 2]],
}


def example_tensors() -> dict[str, torch.Tensor]:
    """X, Q, K, the values, the raw scores Q K^T, the weights and the output."""
    X, W_Q, W_K, W_V = (torch.tensor(EXAMPLE[n], dtype=torch.float32) for n in EXAMPLE)
    Q, K, values = X @ W_Q, X @ W_K, X @ W_V  # (4, 3) @ (3, 2) -> (4, 2)
    out, weights = scaled_dot_product_attention(Q, K, values, causal_mask(4))
    return {
        "X": X,
        "Q": Q,
        "K": K,
        "values": values,
        "scores": Q @ K.T,
        "weights": weights,
        "out": out,
    }


def _grid(ax, x0, y0, numbers, color, label, *, shade=None, hidden=None, fmt="{:g}", w=1.0):
    """A matrix as a grid of cells with its numbers, its top-left corner at (x0, y0)
    (y grows downwards); shade (0..1 per cell) sets each cell's fill strength, hidden
    cells are left empty with a dash; w is a cell's width."""
    from matplotlib.patches import Rectangle

    rows, cols = len(numbers), len(numbers[0])
    for i in range(rows):
        for j in range(cols):
            masked = hidden is not None and hidden[i][j]
            # Light enough everywhere for the grey numbers to read on the fill.
            alpha = 0.0 if masked else 0.35 if shade is None else 0.1 + 0.45 * shade[i][j]
            x = x0 + j * w
            ax.add_patch(Rectangle((x, y0 + i), w, 1, facecolor=color, alpha=alpha, lw=0))
            ax.add_patch(Rectangle((x, y0 + i), w, 1, fill=False, ec=INK, lw=0.6))
            text = "–" if masked else fmt.format(numbers[i][j])
            ax.text(x + w / 2, y0 + i + 0.55, text, ha="center", va="center")
    ax.text(x0 + cols * w / 2, y0 - 0.35, label, ha="center", va="bottom")


def _arrow(ax, start, end, text="", *, side="above"):
    ax.annotate(
        "",
        xy=end,
        xytext=start,
        arrowprops={"arrowstyle": "-|>", "color": INK, "lw": 1, "shrinkA": 2, "shrinkB": 2},
    )
    if text:
        x, y = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        dy = -0.25 if side == "above" else 0.35
        va = "bottom" if side == "above" else "top"
        ax.text(x, y + dy, text, ha="center", va=va)


def one_head_figure():
    """The worked example's data flow, top to bottom: X; the queries, keys and values;
    the scores Q K^T with the future masked; the softmax weights; the output."""
    plt = pyplot(FIGURE_WIDTH)
    t = {k: v.tolist() for k, v in example_tensors().items()}
    future = causal_mask(4).logical_not().tolist()
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 6.0))
    # Row 1: X, then its three projections.
    _grid(ax, 0, 1, t["X"], COLORS[0], "X (T, C)")
    for n, (name, label, color) in enumerate(
        [
            ("Q", "Q = X W_Q", COLORS[1]),
            ("K", "K = X W_K", COLORS[2]),
            ("values", "X W_V", COLORS[3]),
        ]
    ):
        _grid(ax, 5 + 3.5 * n, 1, t[name], color, label)
    _arrow(ax, (3.1, 3), (4.9, 3), "× W")
    # Row 2: the scores, masked, and the weights after the softmax.
    _grid(ax, 0, 8, t["scores"], COLORS[4], "scores Q Kᵀ", hidden=future)
    _grid(
        ax,
        6.6,
        8,
        t["weights"],
        COLORS[4],
        "weights",
        shade=t["weights"],
        hidden=future,
        fmt="{:.2f}",
        w=1.4,
    )
    _arrow(ax, (4.1, 10.8), (6.5, 10.8), "softmax\n(·/√D)")
    _arrow(ax, (6, 5.2), (2, 7.3), "Q, K")
    # Row 3: the output, the weights times the values (straight down from X W_V).
    _grid(ax, 10.6, 14.5, t["out"], COLORS[3], "out = weights @ X W_V", fmt="{:.2f}", w=1.4)
    _arrow(ax, (9.4, 12.2), (10.9, 13.3))
    _arrow(ax, (13, 5.2), (13, 13.3))
    ax.text(
        0,
        13.2,
        "row t: query t\ncolumn s: key s\n–: a future key,\n   weight 0",
        ha="left",
        va="top",
        linespacing=1.3,
    )
    ax.set_xlim(-0.3, 14.3)
    ax.set_ylim(18.8, -0.2)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout(pad=0.1)
    return fig


def head_split_figure(T: int = 4, H: int = 3, D: int = 2):
    """One sequence's (T, C) channels split into H heads of D and moved next to the batch:
    view(B, T, H, D) changes no number's place in memory, transpose(1, 2) makes each
    head a (T, D) matrix of its own."""
    from matplotlib.patches import Rectangle

    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5.9))

    def cell(x, y, head):
        ax.add_patch(Rectangle((x, y), 1, 1, facecolor=COLORS[head], lw=0))
        ax.add_patch(Rectangle((x, y), 1, 1, fill=False, ec=INK, lw=0.6))

    # (B, T, C): one row per position, C = H * D channels side by side.
    for t in range(T):
        for c in range(H * D):
            cell(c, t, c // D)
    ax.text(H * D + 0.6, T / 2, "(B, T, C)\nx of one sequence", va="center")
    for h in range(H):  # which head each group of D channels is
        ax.text(h * D + D / 2, -0.2, f"head {h}", ha="center", va="bottom")
    _arrow(ax, (H * D / 2, T + 0.2), (H * D / 2, T + 1.8))
    ax.text(H * D / 2 + 0.4, T + 1, ".view(B, T, H, D)", va="center")
    # (B, T, H, D): the same numbers, grouped: channel h * D + d is head h's d-th.
    y0, gap = T + 2, 0.5
    for t in range(T):
        for h in range(H):
            for d in range(D):
                cell(h * (D + gap) + d, y0 + t, h)
    right = H * (D + gap)
    ax.text(right + 0.1, y0 + T / 2, "(B, T, H, D)\nH heads of D", va="center")
    _arrow(ax, (H * D / 2, y0 + T + 0.2), (H * D / 2, y0 + T + 1.8))
    ax.text(H * D / 2 + 0.4, y0 + T + 1, ".transpose(1, 2)", va="center")
    # (B, H, T, D): each head a (T, D) matrix, a batch entry of its own.
    y1 = y0 + T + 2
    for h in reversed(range(H)):
        for t in range(T):
            for d in range(D):
                cell(h * 0.6 + d, y1 + h * 0.6 + t, h)
    ax.text(right + 0.1, y1 + T / 2 + 0.6, "(B, H, T, D)\na (T, D) matrix\nper head", va="center")
    ax.set_xlim(-0.3, 13.5)
    ax.set_ylim(y1 + T + (H - 1) * 0.6 + 0.3, -1.3)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout(pad=0.1)
    return fig
