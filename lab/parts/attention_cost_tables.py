"""What attention costs, read from a result file: the page's tables and figures.

The attention-cost page prints these from docs/assets/results/attention-cost.json
and attention-overhead.json; `python -m lab.figures` redraws the figures.
"""

from lab.parts.attention_cost_runs import MODE_LABELS, MODES
from lab.shared.experiment import describe_machine
from lab.shared.style import FIGURE_WIDTH, growth_axes, pyplot, svg_text
from snippets.pages.attention_cost import VARIANT_LABELS, VARIANTS

# ------------------------------------------------------------------ tables


def _num(value: float) -> str:
    """Three significant digits, no exponent: 0.123, 1.23, 12.3, 123, 1,234."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def lookup(data: dict, variant: str, n_head: int, seq_len: int) -> dict:
    """The result row of one variant at one head count and sequence length."""
    wanted = (variant, n_head, seq_len)
    for row in data["results"]:
        if (row["variant"], row["n_head"], row["seq_len"]) == wanted:
            return row
    raise KeyError(f"no result for {variant}, n_head={n_head}, seq_len={seq_len}")


def _table(header: list[str], rows: list[list[str]]) -> str:
    """Right-aligned columns, the variant columns at least 8 wide."""
    labels = set(VARIANT_LABELS.values())
    widths = [
        max(len(h), *(len(row[i]) for row in rows), 8 if h in labels else 5)
        for i, h in enumerate(header)
    ]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    for row in rows:
        lines.append("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
    return "\n".join(line.rstrip() for line in lines)


def measured(data: dict) -> list[str]:
    """The variants of a result file, in the tables' order."""
    return [v for v in VARIANTS if v in data["variants"]]


def _cell(row: dict, mode: str, show) -> str:
    """show(measurement), or n/a where the variant has no such mode."""
    return "n/a" if row.get(mode) is None else show(row[mode])


def _per_T_table(data: dict, n_head: int, titles: dict, show, busy=False) -> str:
    """One block per mode: a row per T, a column per variant."""
    variants = measured(data)
    labels = [VARIANT_LABELS[v] for v in variants]
    blocks = []
    for mode in MODES:
        rows = []
        for T in data["settings"]["seq_lens"]:
            cells = [lookup(data, v, n_head, T) for v in variants]
            row = [str(T)] + [_cell(c, mode, show) for c in cells]
            if busy:  # the share of the CPU other processes took while T was measured
                share = cells[0].get("others_cpu_share")
                row.append("?" if share is None else f"{share:.0%}")
            rows.append(row)
        header = ["T", *labels] + (["others"] if busy else [])
        blocks.append(f"{titles[mode]}\n{_table(header, rows)}")
    return "\n\n".join(blocks)


def time_table(data: dict, n_head: int) -> str:
    """Median milliseconds per run, forward then forward+backward, a row per T.

    The last column is the share of the CPU that other processes took while
    that row was measured: above a few percent, its times are too high.
    """
    titles = {"forward": "forward, ms", "forward_backward": "forward+backward, ms"}
    return _per_T_table(data, n_head, titles, lambda c: _num(c["median_ms"]), busy=True)


def memory_table(data: dict, n_head: int) -> str:
    """Peak MiB of tensors alive during a run, forward then forward+backward."""
    titles = {"forward": "forward peak, MiB", "forward_backward": "fwd+bwd peak, MiB"}
    return _per_T_table(data, n_head, titles, lambda c: _num(c["peak_bytes"] / 2**20))


def heads_table(data: dict, seq_len: int) -> str:
    """forward+backward time and peak memory at one T, a row per head count."""
    variants = measured(data)
    labels = [VARIANT_LABELS[v] for v in variants]
    n_embed = data["settings"]["n_embed"]
    blocks = []
    for title, show in (
        ("fwd+bwd, ms", lambda c: _num(c["median_ms"])),
        ("fwd+bwd peak, MiB", lambda c: _num(c["peak_bytes"] / 2**20)),
    ):
        rows = [
            [f"{n_head} ({n_embed // n_head})"]
            + [_cell(lookup(data, v, n_head, seq_len), "forward_backward", show) for v in variants]
            for n_head in data["settings"]["heads"]
        ]
        blocks.append(f"{title}\n{_table(['H (D)', *labels], rows)}")
    return "\n\n".join(blocks)


def compile_table(data: dict, n_head: int) -> str:
    """FlexAttention's first forward at each T against its median forward.

    The first call in the process compiles; later sizes reuse the compiled
    kernel (dynamic shapes) unless a size needs a recompile.
    """
    rows = []
    for T in data["settings"]["seq_lens"]:
        row = lookup(data, "flex", n_head, T)
        rows.append([str(T), f"{row['first_call_seconds']:.2f}", _num(row["forward"]["median_ms"])])
    return _table(["T", "first call, s", "median, ms"], rows)


def overhead_table(data: dict) -> str:
    """Median microseconds per forward call, module and inline, and the ratio."""
    rows = [
        [
            str(r["seq_len"]),
            f"{r['module_us']:,.1f}",
            f"{r['inline_us']:,.1f}",
            f"{r['ratio']:.3f}",
            f"{r['others_cpu_share']:.0%}",
        ]
        for r in data["results"]
    ]
    header = ["T", "module, us", "inline, us", "module / inline", "others"]
    return _table(header, rows)


def describe_settings(data: dict) -> str:
    """One line: sizes, dtype and how the times were taken."""
    s = data["settings"]
    untimed = 2 + s["warmup"]  # the memory run, the page-fault run, warm-up rounds
    clock = "CPU time" if s.get("clock") == "cpu" else "wall-clock time"
    return (
        f"B={s['batch']}, C={s['n_embed']}, float32; median {clock} of"
        f" {s['repetitions']} timed runs (after {untimed} untimed), jobs taking turns"
    )


def describe_run(data: dict) -> str:
    """The machine (experiment.describe_machine), then how busy it was during the run."""
    text = describe_machine(data)
    rows = data.get("results", [])
    if rows and all(r.get("others_cpu_share") is not None for r in rows):
        weighted = sum(r["others_cpu_share"] * r["seconds"] for r in rows)
        mean = weighted / sum(r["seconds"] for r in rows)
        highest = max(r["others_cpu_share"] for r in rows)
        text += (
            f"\nCPU time taken by other processes during the run: {mean:.0%}"
            f" on average, {highest:.0%} at most"
        )
    cells = [r[m] for r in rows for m in MODES if r.get(m)]
    if cells and "retaken" in cells[0]:
        kept = [w for c in cells for w in c["waited"]]
        waited = sum(w > data["settings"]["max_waited"] for w in kept)
        text += (
            f"\nruns retaken as another process held a CPU:"
            f" {sum(c['retaken'] for c in cells)}; kept runs that waited:"
            f" {waited} of {len(kept)}"
        )
    return text


# ------------------------------------------------------------------ figures

VARIANT_STYLE = {  # colour and marker of each implementation on the cost page
    "per-head": ("#D55E00", "o"),
    "manual": ("#CC79A7", "s"),
    "einsum": ("#3a86c8", "D"),  # 3.87:1 on white, 4.19:1 on slate
    "torch-mha": ("#9467bd", "v"),  # 4.26:1, 3.81:1
    "flex": ("#a6761d", "P"),  # 4.01:1, 4.04:1
    "sdpa": ("#009E73", "^"),
}
BUSY = 0.1  # above this share of the CPU taken by others, a time is drawn hollow


def cost_figure(data: dict, what: str):
    """Time or peak memory against T, log-log, forward above forward+backward
    (a result of `python -m lab.attention_cost attention`): stacked, at lab.shared.style's
    width, so that the text is legible on a phone.

    Args:
        data: the result file's content.
        what: "time" (median ms) or "memory" (peak MiB of tensors).

    Dashed guides through the largest T of the manual and the fused variant rise
    like T² and like T; markers of wall-clock times measured while other
    processes took more than BUSY of the CPU are hollow.
    """
    if what not in ("time", "memory"):
        raise ValueError(f"what ({what!r}) must be 'time' or 'memory'")
    plt = pyplot(FIGURE_WIDTH)
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
    fig, axes = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 7.4), sharex=True, sharey=True)
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
    axes[0].set_xlabel("")  # the panels share T: one label, under the lower
    ylabel = "peak MiB of tensors"
    if what == "time":
        ylabel = "CPU ms per run" if cpu_clock else "ms per run"
    for ax in axes:
        ax.set_ylabel(f"{ylabel} (log scale)")
    title = "Time" if what == "time" else "Peak memory"
    setting = f"H={n_head}, " + describe_settings(data).split(";")[0]
    fig.suptitle(f"{title} against T ({setting})")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=2, bbox_to_anchor=(0.5, 0.965))
    fig.tight_layout(rect=(0, 0, 1, 0.87))
    return fig


def plots(data: dict) -> dict[str, str]:
    """The two SVG files of a result, time and peak memory against T.

    Returns:
        file name -> SVG text, drawn for the head count settings["plot_heads"].
    """
    return {
        f"attention-cost-{what}.svg": svg_text(cost_figure(data, what))
        for what in ("time", "memory")
    }
