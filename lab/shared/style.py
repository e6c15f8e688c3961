"""The one plotting style of the site: ink, colours, and saving figures.

Every figure is drawn with pyplot() from here and saved with save_svg() (a file)
or inline_svg() (inside a page). Each experiment module draws its own figures;
`python -m lab.figures` redraws every committed one.

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
import math
import re
from pathlib import Path

from lab.shared.common import atomic_write

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


# A figure inside a page is drawn at its own size (1 pt = 4/3 CSS px) unless the column is
# narrower: a phone's column, 390 px less Material's two 16 px margins, shrinks it to fit.
# Its text must still be MIN_TEXT_PX tall there (tests/browser/js/phone-legibility.js).
PHONE_COLUMN_PX = 358
MIN_TEXT_PX = 10


def legible_font_size(width_in: float) -> float:
    """The smallest font size (pt, rounded up to a half point, 2 % to spare) whose text is
    still MIN_TEXT_PX CSS px tall when a figure width_in inches wide is shown in a phone's
    column: a 5-inch figure, shrunk to 358/480 of its size, needs 10.5 pt."""
    shrink = min(1.0, PHONE_COLUMN_PX / (96 * width_in))
    return math.ceil(MIN_TEXT_PX * 0.75 / shrink * 1.02 * 2) / 2


# An image figure's width: shown at its own size on a desktop (461 px, text 13 px), shrunk to
# 358/461 on a phone, where legible_font_size(4.8) = 10 pt is still 10.4 px. Panels that a
# wider figure would put side by side are stacked instead.
FIGURE_WIDTH = 4.8
# The font sizes legible() sets, all to one size (matplotlib draws titles "large").
SIZED = ("font.size", "axes.titlesize", "figure.titlesize", "legend.fontsize")


def legible(width_in: float = FIGURE_WIDTH) -> dict:
    """rcParams drawing every text of a figure width_in inches wide at
    legible_font_size(width_in): pyplot(width_in) applies them."""
    if not 0 < width_in <= 12:
        raise ValueError(f"width_in ({width_in!r}) must be a figure width in inches, 0 to 12")
    return dict.fromkeys(SIZED, legible_font_size(width_in))


def pyplot(width_in: float | None = None):
    """matplotlib.pyplot drawing to files only (Agg), in the site's style; with width_in,
    every text at the size legible() gives a figure that wide (an image figure's)."""
    # matplotlib is imported on first use: the hooks and the page harness import
    # lab modules without drawing anything.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from cycler import cycler

    undone = {k: matplotlib.rcParamsDefault[k] for k in SIZED}  # a previous figure's sizes
    sized = legible(width_in) if width_in is not None else {}
    plt.rcParams.update({**undone, **STYLE, **sized, "axes.prop_cycle": cycler(color=COLORS)})
    return plt


def svg_text(fig) -> str:
    """The figure as SVG text, closed afterwards: same figure, same text."""
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    import matplotlib.pyplot as plt  # not pyplot(): closing must not reset a caller's rcParams

    plt.close(fig)
    return buffer.getvalue()


def save_svg(fig, path: Path) -> Path:
    """svg_text(fig), written atomically to path."""
    text = svg_text(fig)
    return atomic_write(path, lambda f: f.write(text))


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
