"""Masks beyond causal: their figures and what a sliding window costs.

    python -m lab.masks cost            # the page's numbers, a few minutes
    python -m lab.masks cost --quick    # small sizes, seconds (the tests run it)

`cost` times one attention call with a sliding-window mask three ways, for T
from 256 to 8192: FlexAttention with a block mask (compiled), the dense mask given
to F.scaled_dot_product_attention, and full causal SDPA (is_causal=True) for
reference. It writes docs/assets/results/masks-cost.json and masks-cost.svg and
prints the table. FlexAttention is compiled once per process
(compiled_flex_attention); its compile time is reported apart from the runs.
The page's figures of masks are drawn here too; `python -m lab.figures` redraws them.
"""

import functools
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask

from lab.shared.common import RESULTS_DIR, note_load_after
from lab.shared.experiment import Command, describe_machine, int_list, progress, randn
from lab.shared.result_pages import load, markdown_table, measured_note, value_table
from lab.shared.style import COLORS, FIGURE_WIDTH, INK, growth_axes, pyplot
from snippets.core.masks import (
    bidirectional_mask,
    causal_mask,
    document_mask,
    prefix_lm_mask,
    sliding_window_mask,
    sliding_window_mask_mod,
)
from snippets.pages.attention_cost import compiled_flex_attention
from snippets.pages.measure import time_interleaved

SCHEMA = "attention-guide/masks-cost/1"
COST_FILE = RESULTS_DIR / "masks-cost.json"
COST_PLOT = RESULTS_DIR / "masks-cost.svg"
WINDOW = 64  # the sliding window of the benchmark, the tests and the page
DEFAULT_T = [256, 512, 1024, 2048, 4096, 8192]
QUICK_T = [256, 512]
JOBS = ("flex", "dense", "causal")
JOB_LABELS = {
    "flex": "FlexAttention, block mask",
    "dense": "SDPA, dense window mask",
    "causal": "SDPA, causal (no window)",
}


@functools.cache
def window_mask_mod(window: int):
    """sliding_window_mask_mod(window), one object per window for the process.

    The compiled kernel is kept for a mask_mod object; a new but equal closure
    at every call can cost a compile again once the old one is freed.
    """
    return sliding_window_mask_mod(window)


_BLOCK_MASK_TENSORS = (
    "kv_num_blocks",
    "kv_indices",
    "full_kv_num_blocks",
    "full_kv_indices",
    "q_num_blocks",
    "q_indices",
    "full_q_num_blocks",
    "full_q_indices",
)


def flex_forward(q, k, v, block_mask) -> torch.Tensor:
    """Compiled FlexAttention, called the one way this project calls it.

    Inference only (no_grad) on contiguous (B, H, T, D) tensors: grad mode and
    strides are part of what a compiled graph is specialised for, so the tests,
    the page and the benchmark all call it alike and share one compile (with
    B=1, H=4, D=32: a batch of 1 and the head size are fixed in the kernel).
    The block mask's tables are marked dynamic in their block dimensions:
    otherwise the first new T recompiles, to learn that they vary.
    """
    for name in _BLOCK_MASK_TENSORS:
        table = getattr(block_mask, name, None)
        if table is not None:
            for dim in range(2, table.dim()):  # (B, H, blocks[, blocks])
                torch._dynamo.maybe_mark_dynamic(table, dim)
    flex = compiled_flex_attention()
    with torch.no_grad():
        return flex(q.contiguous(), k.contiguous(), v.contiguous(), block_mask=block_mask)


def block_mask_for(mask_mod, T: int, B: int | None = None):
    """create_block_mask on the CPU, for a (T, T) score matrix."""
    return create_block_mask(mask_mod, B=B, H=None, Q_LEN=T, KV_LEN=T, device="cpu")


# ------------------------------------------------------------------ measuring


def _jobs(q, k, v, block_mask, dense) -> dict:
    """The three calls timed, each one attention forward pass."""
    return {
        "flex": lambda: flex_forward(q, k, v, block_mask),
        "dense": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=dense),
        "causal": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }


def run_cost(seq_lens, window, batch, n_head, head_size, repetitions, warmup) -> dict:
    """Time the three jobs at every T; returns the result file's body."""
    mask_mod = window_mask_mod(window)
    block_mask_for(mask_mod, 128)  # the first call pays for imports: not timed
    results, compile_seconds = [], None
    for T in seq_lens:
        q, k, v = (randn(batch, n_head, T, head_size, seed=s) for s in range(3))
        start = time.process_time()
        block_mask = block_mask_for(mask_mod, T)
        block_mask_ms = (time.process_time() - start) * 1e3  # CPU time
        dense = sliding_window_mask(T, window)  # (T, T), broadcast over B and H
        with torch.no_grad():
            start = time.perf_counter()
            out_flex = flex_forward(q, k, v, block_mask)
            first_call = time.perf_counter() - start
            if compile_seconds is None:
                compile_seconds = round(first_call, 2)  # the first call compiles
            out_dense = F.scaled_dot_product_attention(q, k, v, attn_mask=dense)
        max_diff = (out_flex - out_dense).abs().max().item()
        jobs = _jobs(q, k, v, block_mask, dense)
        with torch.no_grad():
            timed = time_interleaved(jobs, repetitions, warmup)
        row = {
            "seq_len": T,
            # create_block_mask evaluates mask_mod at all T * T pairs: quadratic,
            # but done once per mask and T, for every layer and step.
            "block_mask_cpu_ms": round(block_mask_ms, 3),
            # Blocks FlexAttention computes, of all (T/128)^2 blocks.
            "block_density": round(1 - block_mask.sparsity() / 100, 4),
            "flex_matches_dense": max_diff <= 1e-5,
            "first_call_s": round(first_call, 3),
        }
        for name in JOBS:
            # CPU time (process_time) counts only the time the process ran, not the
            # time it waited for a core: with one thread, the wall time of an idle machine.
            cpu_ms = [round(s * 1e3, 4) for s in timed[name]["cpu_seconds"]]
            wall_ms = [round(s * 1e3, 4) for s in timed[name]["seconds"]]
            row[name] = {
                "cpu_ms": statistics.median(cpu_ms),
                "wall_ms": statistics.median(wall_ms),
                "runs_cpu_ms": cpu_ms,
                "runs_wall_ms": wall_ms,
            }
        results.append(row)
        progress(
            f"T={T}: "
            + ", ".join(f"{n} {row[n]['cpu_ms']:.2f} ms" for n in JOBS)
            + f", agree: {row['flex_matches_dense']}"
        )
    return {"compile_seconds": compile_seconds, "results": results}


# ------------------------------------------------------------------ reading the file


def growth(data: dict, job: str) -> list[float | None]:
    """Time at T over time at T // 2, per row (None for the first)."""
    ms = [row[job]["cpu_ms"] for row in data["results"]]
    return [None] + [b / a for a, b in zip(ms, ms[1:], strict=False)]


def cost_table(data: dict) -> str:
    """Median CPU ms per call of each job against T, and x per doubling of T."""
    names = ("FlexAttention", "dense SDPA", "causal SDPA")
    header = f"{'T':>5}" + "".join(f"{n:>19}" for n in names)
    lines = [header, f"{'':>5}" + "".join(f"{'ms':>11}{'growth':>8}" for _ in JOBS)]
    steps = {job: growth(data, job) for job in JOBS}
    for i, row in enumerate(data["results"]):
        cells = []
        for job in JOBS:
            step = steps[job][i]
            cells.append(f"{row[job]['cpu_ms']:>11.2f}")
            cells.append(f"{'' if step is None else f'x{step:.1f}':>8}")
        lines.append(f"{row['seq_len']:>5}" + "".join(cells))
    return "\n".join(lines)


def describe_run(data: dict) -> str:
    """Machine, settings and how busy the machine was, a few lines."""
    s = data["settings"]
    rows = data["results"]
    wall = sum(statistics.median(r[j]["runs_wall_ms"]) for r in rows for j in JOBS)
    cpu = sum(statistics.median(r[j]["runs_cpu_ms"]) for r in rows for j in JOBS)
    return (
        f"{describe_machine(data, brief=True)}\n"
        f"wall time / CPU time of the runs: {wall / cpu:.2f}\n"
        f"B={s['batch']}, H={s['n_head']}, D={s['head_size']}, window={s['window']},"
        f" float32, forward\nmedian CPU time of {s['repetitions']} runs"
        f" (after {s['warmup']} untimed); growth: time at T / time at T/2"
    )


# ------------------------------------------------------------------ figures


def cost_plot(data: dict):
    """Milliseconds per call against T, log-log, with guides rising like T and T²."""
    plt = pyplot(FIGURE_WIDTH)
    seq_lens = [row["seq_len"] for row in data["results"]]
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.6))
    markers = {"flex": "o", "dense": "s", "causal": "^"}
    for job, color in zip(JOBS, (COLORS[0], COLORS[1], COLORS[2]), strict=True):
        ms = [row[job]["cpu_ms"] for row in data["results"]]
        ax.plot(seq_lens, ms, color=color, marker=markers[job], label=JOB_LABELS[job])
    last = data["results"][-1]
    growth_axes(ax, seq_lens, last["dense"]["cpu_ms"], last["flex"]["cpu_ms"])
    ax.set_ylabel("CPU milliseconds per call (log scale)")
    s = data["settings"]
    ax.set_title(f"Sliding window of {s['window']}: time per attention call")
    ax.grid(True, which="major")
    ax.legend()
    fig.tight_layout()
    return fig


FIGURE_T = 12
FIGURES = {  # file stem -> (title, the mask drawn)
    "causal": ("causal", lambda: causal_mask(FIGURE_T)),
    "bidirectional": ("bidirectional (encoder)", lambda: bidirectional_mask(FIGURE_T)),
    "sliding-window": (
        "sliding window, window = 4",
        lambda: sliding_window_mask(FIGURE_T, 4),
    ),
    "prefix-lm": ("prefix-LM, prefix_length = 5", lambda: prefix_lm_mask(FIGURE_T, 5)),
    "document": (
        "documents of 5, 4 and 3 tokens",
        lambda: document_mask(torch.tensor([[0] * 5 + [1] * 4 + [2] * 3]))[0],
    ),
}


def mask_figure(mask: torch.Tensor, title: str):
    """A (T, T) mask as a grid: a filled cell where query i may see key j."""
    from matplotlib.colors import ListedColormap  # matplotlib only when drawing (lab.shared.style)

    plt = pyplot()  # 3 inches: shown at its own size on a phone, 9 pt is 12 px
    T = mask.size(-1)
    fig, ax = plt.subplots(figsize=(3.0, 3.2))
    # Hidden cells stay transparent: the page's own background shows through.
    ax.imshow(mask.int().numpy(), cmap=ListedColormap(["none", COLORS[0]]), vmin=0, vmax=1)
    ax.set_xticks(range(T), [str(j) if j % 2 == 0 else "" for j in range(T)])
    ax.set_yticks(range(T), [str(i) if i % 2 == 0 else "" for i in range(T)])
    ax.set_xticks([t - 0.5 for t in range(T + 1)], minor=True)
    ax.set_yticks([t - 0.5 for t in range(T + 1)], minor=True)
    ax.grid(True, which="minor", color=INK, linewidth=0.6, alpha=0.9)
    ax.set_axisbelow(False)  # the grid over the cells too: each cell stays countable
    ax.tick_params(which="both", length=0)
    ax.xaxis.set_label_position("top")
    ax.xaxis.tick_top()
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    ax.set_title(title, fontsize=9, pad=4, y=-0.1)
    fig.tight_layout()
    return fig


def figure_path(stem: str):
    """Where the committed figure of FIGURES[stem] is."""
    return RESULTS_DIR / f"masks-{stem}.svg"


# ------------------------------------------------------------------ command line


def cmd_cost(cmd: Command) -> dict:
    args = cmd.args
    seq_lens = sorted(set(args.seq_lens or (QUICK_T if args.quick else DEFAULT_T)))
    repetitions = args.repetitions or (3 if args.quick else 15)
    warmup = 1 if args.quick else 3
    header = cmd.header(SCHEMA)
    settings = {
        "seq_lens": seq_lens,
        "window": args.window,
        "batch": 1,
        "n_head": 4,
        "head_size": 32,
        "repetitions": repetitions,
        "warmup": warmup,
        "block_size": 128,
        "compile": "torch.compile(flex_attention, dynamic=True), once",
    }
    start = time.perf_counter()
    body = run_cost(
        seq_lens,
        args.window,
        settings["batch"],
        settings["n_head"],
        settings["head_size"],
        repetitions,
        warmup,
    )
    data = {
        **note_load_after(header),
        "settings": settings,
        "elapsed_seconds": round(time.perf_counter() - start, 1),
        **body,
    }
    cmd.write(COST_FILE.name, data)
    cmd.write(COST_PLOT.name, cost_plot(data))
    print(describe_run(data))
    print(f"compile (first call, T={seq_lens[0]}): {data['compile_seconds']} s")
    print(cost_table(data))
    return data


def command() -> Command:
    cmd = Command("lab.masks", __doc__, threads=1, subcommands=True)
    cost = cmd.subcommand("cost", help="time a sliding window three ways (--quick: T=256,512)")
    # 128: FlexAttention's block size, the smallest T its block mask covers.
    cost.add_argument("--seq-lens", type=int_list(minimum=128), help="T values, each >= 128")
    cost.add_argument("--window", type=int, default=WINDOW)
    cost.add_argument("--repetitions", type=int, help="timed runs per job and T")
    return cmd


def main(argv: list[str] | None = None) -> int:
    cmd = command()
    cmd.parse(argv)
    cmd_cost(cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the masks page
# Rendered into docs/masks.md by the build (hooks/results.py) from the committed file.


def cost_result() -> str:
    """The cost table of docs/masks.md and how it was measured."""
    data = load("masks-cost.json")
    steps = {job: growth(data, job) for job in JOBS}
    rows = []
    for i, row in enumerate(data["results"]):
        cells = [str(row["seq_len"])]
        for job in JOBS:
            cells += [f"{row[job]['cpu_ms']:.2f}", "" if i == 0 else f"x{steps[job][i]:.1f}"]
        rows.append(cells)
    header = ["T"]
    for name in ("FlexAttention", "dense SDPA", "causal SDPA"):
        header += [f"{name}, ms", "growth"]
    table = markdown_table(header, rows)
    note = measured_note(
        data,
        [
            describe_run(data).split("\n", 2)[2].replace("\n", "; "),
            f"compile, the first call: {data['compile_seconds']} s",
        ],
        seconds=data["elapsed_seconds"],
    )
    return f"{table}\n\n{note}"


def cost_values() -> dict[str, str]:
    """The numbers of the cost section's prose."""
    data = load("masks-cost.json")
    rows = {row["seq_len"]: row for row in data["results"]}
    steps = dict(zip(rows, growth(data, "flex"), strict=True))
    T = max(rows)
    ms = {job: rows[T][job]["cpu_ms"] for job in JOBS}
    return value_table(
        {
            "flex_growth": ", ".join(f"x{steps[t]:.1f}" for t in rows if t >= 1024),
            "all_match": "Yes" if all(r["flex_matches_dense"] for r in rows.values()) else "No",
            "T": f"{T:,}",
            "vs_dense": f"{ms['dense'] / ms['flex']:.0f}",
            "vs_causal": f"{ms['causal'] / ms['flex']:.0f}",
            "density": ", ".join(f"{r['block_density']:.1%}" for r in rows.values()),
            "mask_ms": ", ".join(f"{r['block_mask_cpu_ms']:,.0f}" for r in rows.values()),
            "compile": f"{data['compile_seconds']:.0f}",
        }
    )
