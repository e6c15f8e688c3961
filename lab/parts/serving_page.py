"""The serving page's results, as the build renders them (hooks/results.py).

`python -m lab.serving` writes docs/assets/results/serving.json and the figure
serving-speculative.svg; this module formats them: the aligned text tables the command
prints (report), the figure (speculative_figure), and the Markdown of each result on
docs/serving.md (memory_result, throughput_result, attention_result,
speculative_result) with values(), the numbers of the page's prose.
"""

from lab.shared.paths import RESULTS_DIR
from lab.shared.result_pages import load, markdown_table, measured_note, value_table
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot

RESULT_FILE = RESULTS_DIR / "serving.json"
FIGURE = RESULTS_DIR / "serving-speculative.svg"

# ------------------------------------------------------------------ the command's tables


def memory_table(data: dict) -> str:
    m = data["memory"]
    s = data["settings"]["memory"]
    kib = 1024
    lines = [
        f"memory: {s['requests']} requests, {s['max_seqs']} at once; contiguous"
        f" preallocation {m['contiguous_bytes'] / kib:,.0f} KiB",
        f"{'workload':<14}{'block size':>11}{'peak blocks':>13}{'paged KiB':>11}"
        f"{'paged/contig.':>15}{'shared positions':>18}",
    ]
    for name, w in m["workloads"].items():
        for r in w["runs"]:
            lines.append(
                f"{name:<14}{r['block_size']:>11}{r['peak_blocks']:>13}"
                f"{r['paged_bytes'] / kib:>11,.0f}"
                f"{r['paged_bytes'] / m['contiguous_bytes']:>15.2f}"
                f"{r['shared_positions']:>18}"
            )
    return "\n".join(lines)


def throughput_table(data: dict) -> str:
    t = data["throughput"]
    lines = [
        "throughput: new tokens per second (forward passes)",
        f"{'seed':>4}{'static':>18}{'continuous':>18}{'paired ratio':>14}{'same outputs':>14}",
    ]
    for row in t["seeds"]:
        cells = [
            f"{row[m]['tokens_per_second']:.0f} ({row[m]['steps']})"
            for m in ("static", "continuous")
        ]
        lines.append(
            f"{row['seed']:>4}{cells[0]:>18}{cells[1]:>18}{row['speedup']:>14.2f}"
            f"{row['same_outputs']!s:>14}"
        )
    lo, hi, ratio = t["static_range"], t["continuous_range"], t["speedup_range"]
    lines.append(
        f"range over seeds: static {lo[0]:.0f}..{lo[1]:.0f}, continuous"
        f" {hi[0]:.0f}..{hi[1]:.0f} tokens/s (overlap: {t['overlap']});"
        f" paired ratio {ratio[0]:.2f}..{ratio[1]:.2f}"
    )
    return "\n".join(lines)


def attention_table(data: dict) -> str:
    a = data["attention"]
    lines = [
        f"attention, one decode step, one layer ({a['heads']} heads of D ="
        f" {a['head_size']}), median microseconds",
        f"{'keys':>6}{'block table':>13}{'contiguous':>12}{'ratio':>8}",
    ]
    for r in a["rows"]:
        lines.append(
            f"{r['length']:>6}{r['paged_us']:>13.1f}{r['contiguous_us']:>12.1f}{r['ratio']:>8.2f}"
        )
    return "\n".join(lines)


def speculative_table(data: dict) -> str:
    sp = data["speculative"]
    lines = [
        "speculative decoding against the target's plain greedy generate",
        f"{'draft':<20}{'k':>3}{'acceptance':>12}{'target passes':>15}{'saved':>8}"
        f"{'speed-up':>10}{'runs':>13}{'predicted':>11}",
    ]
    for r in sp["rows"]:
        saved = 1 - r["target_passes"] / r["plain_passes"]
        spread = f"{min(r['speedups']):.2f}..{max(r['speedups']):.2f}"
        lines.append(
            f"{r['draft']:<20}{r['k']:>3}{r['acceptance']:>12.2f}"
            f"{r['target_passes']:>8} of {r['plain_passes']:<4}{saved:>8.0%}"
            f"{r['speedup']:>10.2f}{spread:>13}{predicted_speedup(sp, r):>11.2f}"
        )
    c = sp["pass_costs"]
    lines.append(
        f"one decode pass: target {c['target_contiguous_us']:.0f} µs through its"
        f" contiguous cache, {c['target_paged_us']:.0f} µs through a paged one; draft"
        f" {c['draft_paged_us']:.0f} µs paged"
    )
    return "\n".join(lines)


def predicted_speedup(sp: dict, r: dict) -> float:
    """The speed-up the passes alone predict: plain passes at the contiguous cost over
    target passes and draft passes at their paged costs."""
    c = sp["pass_costs"]
    plain = r["plain_passes"] * c["target_contiguous_us"]
    return plain / (r["target_passes"] * c["target_paged_us"] + r["drafted"] * c["draft_paged_us"])


def speculative_figure(data: dict):
    """Speed-up against acceptance rate: a line per draft through its k = 1..6."""
    plt = pyplot(FIGURE_WIDTH)
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 5.6))
    rows = data["speculative"]["rows"]
    colors = [INK, *COLORS]  # the untrained draft in grey: it sits at acceptance 0
    for name, color in zip(data["speculative"]["drafts"], colors, strict=False):
        mine = [r for r in rows if r["draft"] == name]
        ax.plot(
            [r["acceptance"] for r in mine],
            [r["speedup"] for r in mine],
            color=color,
            marker="o",
            linewidth=1.5,
            label=f"draft: {name}",
        )
    ax.axhline(1.0, color="0.4", linewidth=1, dashes=(2, 2))
    ax.set_xlabel("acceptance rate (accepted / drafted)")
    ax.set_ylabel("speed-up over plain greedy decoding")
    ax.set_xlim(0, 1.02)
    ax.grid(True)
    ax.legend(
        loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2,
        title="each line: k = 1 to 6 drafts a round",
    )  # fmt: skip
    fig.tight_layout()
    return fig


FIGURES = {FIGURE.name: speculative_figure}


def report(data: dict) -> str:
    return "\n\n".join(
        table(data)
        for table in (memory_table, throughput_table, attention_table, speculative_table)
    )


# ------------------------------------------------------------------ the page's results


def _note(data: dict, lines: list[str], seeds=None) -> str:
    return measured_note(data, lines, seeds=seeds, seconds=data["wall_seconds"])


def memory_result() -> str:
    """A row per workload and block size: the paged blocks held at the busiest step
    against the contiguous preallocation."""
    data = load(RESULT_FILE.name)
    m, s = data["memory"], data["settings"]["memory"]
    rows = []
    for name, w in m["workloads"].items():
        for r in w["runs"]:
            rows.append([
                name, str(r["block_size"]), str(r["peak_blocks"]),
                f"{r['paged_bytes'] / 1024:,.0f}", f"{m['contiguous_bytes'] / 1024:,.0f}",
                f"{r['paged_bytes'] / m['contiguous_bytes']:.2f}",
                str(r["shared_positions"]),
            ])  # fmt: skip
    header = [
        "workload", "block size", "blocks held at the peak", "paged KiB",
        "contiguous KiB", "paged / contiguous", "positions shared",
    ]  # fmt: skip
    note = _note(data, [
        f"{s['requests']} requests, {s['max_seqs']} running at once, greedy; prompts of"
        f" {s['prefix']} + {s['rest'][0]}..{s['rest'][1]} characters of the guide's text,"
        f" {s['new'][0]}..{s['new'][1]} new tokens each (seed {s['seed']})",
        f"{m['bytes_per_position']:,} bytes per position (every layer's keys and values,"
        " float32)",
    ])  # fmt: skip
    return f"{markdown_table(header, rows)}\n\n{note}"


def throughput_result() -> str:
    """A row per workload seed: new tokens per second and forward passes of each."""
    data = load(RESULT_FILE.name)
    t, s = data["throughput"], data["settings"]["throughput"]
    rows = [
        [
            str(r["seed"]), f"{r['static']['tokens_per_second']:.0f}",
            f"{r['continuous']['tokens_per_second']:.0f}", str(r["static"]["steps"]),
            str(r["continuous"]["steps"]), f"{r['speedup']:.2f}",
        ]
        for r in t["seeds"]
    ]  # fmt: skip
    header = [
        "workload seed", "static, tokens/s", "continuous, tokens/s",
        "static, forward passes", "continuous, forward passes",
        "continuous / static, run by run",
    ]  # fmt: skip
    note = _note(data, [
        f"{s['requests']} requests of {s['prompt'][0]}..{s['prompt'][1]} prompt tokens and"
        f" {s['new'][0]}..{s['new'][1]} new ones, {s['max_seqs']} running at once, blocks"
        f" of {s['block_size']}",
        f"{s['repeats']} runs of each batching per seed, alternating which goes first;"
        " the median kept",
    ], seeds=s["seeds"])  # fmt: skip
    return f"{markdown_table(header, rows)}\n\n{note}"


def attention_result() -> str:
    """A row per cache length: one decode step's attention through a block table and
    from contiguous buffers, and their ratio."""
    data = load(RESULT_FILE.name)
    a, s = data["attention"], data["settings"]["attention"]
    rows = [
        [str(r["length"]), f"{r['paged_us']:.1f}", f"{r['contiguous_us']:.1f}",
         f"{r['ratio']:.2f}"]
        for r in a["rows"]
    ]  # fmt: skip
    header = ["keys", "block table, µs", "contiguous, µs", "ratio"]
    note = _note(data, [
        f"one query, {a['heads']} heads of D = {a['head_size']}; the keys and values in"
        f" blocks of {s['block_size']} drawn at random from a pool twice the size needed",
        f"the median of {s['repeats']} runs of each, alternating",
    ])  # fmt: skip
    return f"{markdown_table(header, rows)}\n\n{note}"


def speculative_result() -> str:
    """A row per draft and k: acceptance, target passes, speed-up."""
    data = load(RESULT_FILE.name)
    sp, s = data["speculative"], data["settings"]["speculative"]
    rows = [
        [
            r["draft"], str(r["k"]), f"{r['acceptance']:.2f}",
            f"{r['target_passes']} of {r['plain_passes']}", f"{r['speedup']:.2f}",
            f"{min(r['speedups']):.2f}-{max(r['speedups']):.2f}",
            f"{predicted_speedup(sp, r):.2f}",
        ]
        for r in sp["rows"]
    ]  # fmt: skip
    header = [
        "draft", "k", "acceptance", "target passes", "speed-up", "lowest-highest run",
        "predicted by the passes",
    ]  # fmt: skip
    c = sp["pass_costs"]
    t = data["target"]["config"]
    note = _note(data, [
        f"target: the char GPT's recipe with {t['n_layer']} layers of width"
        f" {t['n_embed']}, context {t['context_length']}, {t['steps']} steps of"
        f" {t['batch_size']}",
        "drafts: the char GPT's recipe (2 layers of width 64) at context"
        f" {t['context_length']}, trained for as many steps as named",
        f"{s['prompts']} prompts of {s['prompt_length']} characters, {s['new_tokens']}"
        f" new tokens each; the median of {s['repeats']} runs against the target's"
        " greedy generate with its KV cache, each prompt run both ways back to back",
        f"one decode pass (median): the target {c['target_contiguous_us']:.0f} µs through"
        f" its contiguous cache, {c['target_paged_us']:.0f} µs through a paged one, the"
        f" draft {c['draft_paged_us']:.0f} µs paged; the predicted speed-up counts passes"
        " at these costs",
    ])  # fmt: skip
    return f"{markdown_table(header, rows)}\n\n{note}"


def values() -> dict[str, str]:
    """The numbers of the page's prose: paged/contiguous at each block size and
    workload (memory_mixed_4, ...), the throughput ratio's range over seeds, the
    block table's cost ratio at the shortest and longest cache, the best speed-up."""
    data = load(RESULT_FILE.name)
    m = data["memory"]
    out = {}
    for name, w in m["workloads"].items():
        for r in w["runs"]:
            key = f"memory_{name.split()[0]}_{r['block_size']}"
            out[key] = f"{r['paged_bytes'] / m['contiguous_bytes']:.2f}"
    t = data["throughput"]
    out["continuous_low"], out["continuous_high"] = (f"{x:.2f}" for x in t["speedup_range"])
    rows = data["attention"]["rows"]
    out["table_shortest"], out["table_longest"] = (
        f"{rows[0]['ratio']:.1f}",
        f"{rows[-1]['ratio']:.1f}",
    )
    best = max(data["speculative"]["rows"], key=lambda r: r["speedup"])
    out["best_speedup"] = f"{best['speedup']:.2f}"
    out["best_draft"], out["best_k"] = best["draft"].replace(" ", "-"), str(best["k"])
    out["best_acceptance"] = f"{best['acceptance']:.2f}"
    return value_table(out)
