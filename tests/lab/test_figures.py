"""Tests for lab/shared/style.py and lab/figures.py: one style for every figure, transparent,
readable on light and dark pages, the same bytes for the same data, and every committed figure
redrawn byte for byte by `python -m lab.figures`."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

from lab import figures
from lab.parts import attention_cost_tables
from lab.shared import style
from lab.shared.common import TRAINING_RESULTS
from lab.train import loss_curve

SVG = "{http://www.w3.org/2000/svg}"
SLATE = "#1e2029"  # Material's dark background: hsl(232, 15%, 14%)


def history() -> dict:
    return json.loads((TRAINING_RESULTS / "markov.json").read_text(encoding="utf-8"))


def luminance(color: str) -> float:
    """WCAG relative luminance of #rrggbb."""
    channels = [int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_same_data_same_bytes():
    first = style.svg_text(loss_curve(history()))
    second = style.svg_text(loss_curve(history()))
    assert first == second
    assert "<dc:date>" not in first  # no date: a redraw changes nothing


def test_background_is_transparent():
    root = ET.fromstring(style.svg_text(loss_curve(history())))
    patches = {}
    for group in root.iter(f"{SVG}g"):
        if re.fullmatch(r"patch_\d+", group.get("id", "")):
            path = group.find(f"{SVG}path")
            patches[group.get("id")] = path.get("style", "") if path is not None else ""
    # patch_1: the figure's background; patch_2: the first axes' background.
    for name in ("patch_1", "patch_2"):
        fill = re.search(r"fill: ([^;]+)", patches[name])
        assert fill and fill[1] == "none", (name, patches[name])


def test_ink_and_series_colours_read_on_white_and_on_slate():
    for color in [style.INK, *style.COLORS]:
        for background in ("#ffffff", SLATE):
            assert contrast(color, background) >= 3, (color, background)
    assert luminance(SLATE) < 0.02  # the dark background really is dark


def test_the_figures_ink_is_the_style_s():
    text = style.svg_text(loss_curve(history()))
    assert f"fill: {style.INK}" in text  # text
    assert f"stroke: {style.INK}" in text  # axes and ticks
    assert "#000000" not in text  # matplotlib's black, unreadable on slate


NUMBER = re.compile(r"-?\d+\.\d+")


def same_drawing(a: str, b: str, tolerance: float = 1e-3) -> bool:
    """The same SVG but for coordinates within `tolerance`: matplotlib's path
    arithmetic differs in the sixth decimal between CPUs (AVX2 against AVX-512 seen:
    182.376947 against 182.376948 in one tick of taming-growth.svg)."""
    if NUMBER.split(a) != NUMBER.split(b):
        return False
    numbers = zip(NUMBER.findall(a), NUMBER.findall(b), strict=True)
    return all(abs(float(x) - float(y)) <= tolerance for x, y in numbers)


def test_same_drawing_catches_what_moves_and_forgives_the_sixth_decimal():
    assert same_drawing('<path d="M 182.376947 5"/>', '<path d="M 182.376948 5"/>')
    assert not same_drawing('<path d="M 182.4 5"/>', '<path d="M 182.3 5"/>')
    assert not same_drawing("<text>0.5</text>", "<text>0.5 nats</text>")


@pytest.mark.parametrize("path", list(figures.committed_figures()), ids=lambda p: p.name)
def test_committed_figure_is_drawn_from_the_committed_result(path):
    """`python -m lab.figures` redraws it: the figure shows the file's data."""
    drawn = style.svg_text(figures.committed_figures()[path]())
    committed = path.read_text(encoding="utf-8")
    assert same_drawing(committed, drawn), "redraw with: python -m lab.figures"


def test_attention_cost_rejects_an_unknown_quantity():
    with pytest.raises(ValueError, match=r"what \('speed'\) must be 'time' or 'memory'"):
        attention_cost_tables.cost_figure({}, "speed")


def phone_text_px(svg: str) -> float:
    """The smallest text of a matplotlib SVG, in CSS px, shown as an <img> in a phone's
    column: its width (pt, 4/3 px each) shrunk to style.PHONE_COLUMN_PX if wider."""
    width_pt = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', svg)[1])
    view_width = float(re.search(r'viewBox="0 0 ([\d.]+)', svg)[1])
    scale = min(width_pt * 4 / 3, style.PHONE_COLUMN_PX) / view_width
    sizes = [float(s) for s in re.findall(r"<text [^>]*font-size: ([\d.]+)px", svg)]
    return min(sizes) * scale


@pytest.mark.parametrize("path", list(figures.committed_figures()), ids=lambda p: p.name)
def test_committed_figure_text_is_legible_on_a_phone(path):
    """Every text of an image figure is style.MIN_TEXT_PX tall in a phone's column (the
    browser measures the same on the built pages: tests/browser/js/img-figure-text.js)."""
    px = phone_text_px(path.read_text(encoding="utf-8"))
    assert px >= style.MIN_TEXT_PX, f"smallest text {px:.1f} px: draw with pyplot(FIGURE_WIDTH)"


def test_phone_text_px_measures_a_wide_figure_shrunk():
    plt = style.pyplot()  # 9 pt on a 6.4-inch figure: 12 px shrunk by 358/614.4
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    ax.set_title("loss")
    assert phone_text_px(style.svg_text(fig)) == pytest.approx(9 * 4 / 3 * 358 / 614.4, abs=0.05)


def test_pyplot_with_a_width_sets_every_text_and_without_undoes_it():
    plt = style.pyplot(style.FIGURE_WIDTH)
    assert plt.rcParams["axes.titlesize"] == plt.rcParams["font.size"] == 10
    plt = style.pyplot()
    assert plt.rcParams["font.size"] == 9 and plt.rcParams["axes.titlesize"] == "large"


def test_legible_rejects_a_width_that_is_no_figure_s():
    with pytest.raises(ValueError, match=r"width_in \(0\) must be a figure width in inches"):
        style.legible(0)
