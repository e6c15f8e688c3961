"""The linear and sparse attention pages' measurements: cost per doubling of T, and recall.

    python -m lab.beyond_softmax cost              # docs/assets/results/beyond-softmax-cost.json
    python -m lab.beyond_softmax recall            # docs/assets/results/beyond-softmax-recall.json
    python -m lab.beyond_softmax figures           # redraw the page's figures from those files
    python -m lab.beyond_softmax cost --quick --out /tmp/x.json    # seconds, for the tests

cost: the forward pass of one attention core (B = 1, H = 4 heads of D = 32, float32,
one thread) at T = 1024 .. 8192: dense causal SDPA, the chunked gated delta rule, and
attention on each query's top_k = 64 keys (gathered: O(T * top_k)), with the lightning
indexer that picks them (its scores are O(T^2)) timed apart; CPU time (it does not count
waiting for a core on a busy machine) and peak tensor memory.

recall: lab/parts/beyond_softmax_recall.py (softmax, linear-only and hybrid GPTs on MQAR).
"""

import argparse
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from lab.shared.common import (
    ARTIFACTS,
    RESULTS_DIR,
    command_line,
    note_load_after,
    result_header,
    write_json,
)
from lab.shared.experiment import progress
from snippets.layers.kv_heads import kv_cache_bytes
from snippets.layers.linear_attention import gated_delta_chunked, state_bytes
from snippets.layers.sparse_attention import LightningIndexer, gather_attention, topk_indices
from snippets.pages.measure import peak_memory, time_interleaved

COST_FILE = RESULTS_DIR / "beyond-softmax-cost.json"
COST_FIGURE = RESULTS_DIR / "beyond-softmax-cost.svg"
STATE_FIGURE = RESULTS_DIR / "beyond-softmax-state.svg"
SCHEMA = "attention-guide/beyond-softmax-cost/1"
SIZES = {"H": 4, "D": 32, "top_k": 64, "index_heads": 2, "index_size": 16, "chunk_size": 64}
FULL = {"seq_lens": [1024, 2048, 4096, 8192], "repetitions": 5}
QUICK = {"seq_lens": [256, 512], "repetitions": 1}
LABELS = {
    "dense": "dense causal SDPA",
    "gated_delta": "Gated DeltaNet, chunked",
    "topk": f"top-{SIZES['top_k']} keys, gathered",
    "indexer": "lightning indexer + top-k choice",
}

# Qwen3-Next-80B-A3B (transformers' Qwen3NextConfig defaults): 48 layers, 36 Gated
# DeltaNet and 12 softmax; bf16 (2 bytes a number).
QWEN3_NEXT = {
    "linear": {
        "n_head": 32,
        "head_k": 128,
        "head_v": 128,
        "conv_channels": 2 * 16 * 128 + 32 * 128,
    },
    "softmax": {"n_kv_head": 2, "head_size": 256},
}


def inputs(T: int, seed: int = 0) -> dict:
    """One set of every job's inputs at length T, its own seed."""
    H, D = SIZES["H"], SIZES["D"]
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, H, T, D, generator=gen) for _ in range(3))
    torch.manual_seed(seed)
    indexer = LightningIndexer(SIZES["index_heads"], H * D, SIZES["index_size"])
    x = torch.randn(1, T, H * D, generator=gen)
    with torch.no_grad():
        indices = topk_indices(indexer(x), SIZES["top_k"])
    unit_k = F.normalize(k, dim=-1)
    g = -torch.rand(1, H, T, generator=gen) * 0.1
    beta = torch.rand(1, H, T, generator=gen)
    return {
        "q": q,
        "k": k,
        "v": v,
        "unit_k": unit_k,
        "g": g,
        "beta": beta,
        "indexer": indexer,
        "x": x,
        "indices": indices,
    }


def jobs(data: dict) -> dict:
    """name -> a function of no arguments running that forward pass."""
    q, k, v = data["q"], data["k"], data["v"]
    chunk = SIZES["chunk_size"]

    def dense():
        F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def gated_delta():
        gated_delta_chunked(
            q * SIZES["D"] ** -0.5, data["unit_k"], v, data["g"], data["beta"], chunk_size=chunk
        )

    def topk():
        gather_attention(q, k, v, data["indices"])

    def indexer():
        topk_indices(data["indexer"](data["x"]), SIZES["top_k"])

    return {"dense": dense, "gated_delta": gated_delta, "topk": topk, "indexer": indexer}


def run_cost(settings: dict, command: str) -> dict:
    header = result_header(SCHEMA, command)
    results = {name: [] for name in LABELS}
    with torch.no_grad():
        for T in settings["seq_lens"]:
            data = inputs(T)
            work = jobs(data)
            times = time_interleaved(work, settings["repetitions"], warmup=1, retries=2)
            for name, fn in work.items():
                memory = peak_memory(fn)
                cell = {
                    "T": T,
                    "cpu_ms": round(statistics.median(times[name]["cpu_seconds"]) * 1e3, 3),
                    "wall_ms": round(statistics.median(times[name]["seconds"]) * 1e3, 3),
                    "peak_bytes": memory["peak_bytes"],
                }
                results[name].append(cell)
                progress(
                    f"T={T} {name}: {cell['cpu_ms']:.1f} CPU ms, "
                    f"{cell['peak_bytes'] / 2**20:.1f} MiB"
                )
    note_load_after(header)
    return {**header, "settings": {**settings, **SIZES}, "results": results}


def per_doubling(cells: list[dict], key: str = "cpu_ms") -> list[float]:
    """The factor from each T to the next (2T)."""
    return [round(b[key] / a[key], 2) for a, b in zip(cells, cells[1:], strict=False)]


def cost_table(data: dict) -> str:
    """CPU ms and peak MiB per T, and the factor per doubling, one row per job."""
    seq_lens = data["settings"]["seq_lens"]
    head = "".join(f"{'T=' + str(T):>10}" for T in seq_lens)
    lines = [f"{'forward pass':<34}{head}   x per doubling   peak MiB at T={seq_lens[-1]}"]
    for name, cells in data["results"].items():
        ms = "".join(f"{c['cpu_ms']:>10.1f}" for c in cells)
        factors = " ".join(f"{f:.1f}" for f in per_doubling(cells))
        peak = cells[-1]["peak_bytes"] / 2**20
        lines.append(f"{LABELS[name]:<34}{ms}   {factors:<16} {peak:8.1f}")
    return "\n".join(lines)


# --------------------------------------------------------------- what a layer carries


def carried_bytes(tokens: int) -> dict:
    """Bytes one layer of Qwen3-Next-80B-A3B carries after `tokens` positions: the KV
    cache and the convolution's inputs in bf16, the delta-rule state in float32, as
    transformers' Qwen3-Next keeps it (torch_chunk_gated_delta_rule computes and returns
    the state in float32)."""
    shape = {k: v for k, v in QWEN3_NEXT["linear"].items() if k != "conv_channels"}
    conv = QWEN3_NEXT["linear"]["conv_channels"]
    linear = state_bytes(**shape, bytes_per_element=4) + state_bytes(
        0, 0, 0, conv_channels=conv, bytes_per_element=2
    )
    softmax = kv_cache_bytes(n_layer=1, tokens=tokens, **QWEN3_NEXT["softmax"])
    return {"linear": linear, "softmax": softmax}


def state_table(token_counts=(1024, 8192, 65536, 262144)) -> str:
    """The page's table: a Gated DeltaNet layer's fixed state against a softmax
    layer's KV cache, and the whole model's 36 + 12 layers, in MiB."""
    lines = [f"{'tokens':>8}  {'linear layer':>12}  {'softmax layer':>13}  {'model (36+12)':>13}"]
    for tokens in token_counts:
        b = carried_bytes(tokens)
        model = 36 * b["linear"] + 12 * b["softmax"]
        lines.append(
            f"{tokens:>8,}  {b['linear'] / 2**20:>12.2f}  "
            f"{b['softmax'] / 2**20:>13.2f}  {model / 2**20:>13.1f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------- figures


def cost_figure(data: dict):
    """CPU ms (top) and peak MiB (bottom) against T, log-log, with T and T^2 guides:
    stacked, so that the figure is lab.shared.style's width and its text legible on a phone."""
    from lab.shared.style import COLORS, FIGURE_WIDTH, growth_axes, pyplot

    plt = pyplot(FIGURE_WIDTH)
    seq_lens = data["settings"]["seq_lens"]
    fig, axes = plt.subplots(2, 1, figsize=(FIGURE_WIDTH, 6.8), sharex=True)
    for ax, (key, scale, ylabel) in zip(
        axes,
        (
            ("cpu_ms", 1.0, "CPU ms per forward pass"),
            ("peak_bytes", 2.0**-20, "peak MiB of tensors"),
        ),
        strict=True,
    ):
        series = {}
        for (name, cells), color, marker in zip(
            data["results"].items(), COLORS, "o^sD", strict=False
        ):
            ys = [c[key] * scale for c in cells]
            series[name] = ys
            ax.plot(
                seq_lens,
                ys,
                color=color,
                marker=marker,
                markersize=5,
                linewidth=1.8,
                label=LABELS[name],
            )
        growth_axes(ax, seq_lens, series["dense"][-1] * 1.5, series["gated_delta"][-1] / 1.5)
        ax.set_ylabel(f"{ylabel}\n(log scale)")
        ax.grid(True, which="major")
    axes[0].set_xlabel("")  # the panels share T: one label, under the lower
    handles, labels = axes[0].get_legend_handles_labels()
    # The four passes above the panels, the two guides inside the lower one.
    fig.legend(handles[:-2], labels[:-2], loc="upper center", bbox_to_anchor=(0.5, 1.0))
    axes[1].legend(handles[-2:], labels[-2:], loc="upper left")
    fig.tight_layout(rect=(0, 0, 1, 0.88))
    return fig


def state_figure():
    """MiB one layer carries against T: the fixed linear state, the growing KV cache.
    lab.shared.style's width, with plain tick labels, so that its text is still 10 CSS px
    on a phone."""
    from matplotlib.ticker import FuncFormatter

    from lab.shared.style import COLORS, FIGURE_WIDTH, INK, pyplot

    plt = pyplot(FIGURE_WIDTH)
    tokens = [2**i for i in range(8, 19)]
    plain = FuncFormatter(lambda v, _: f"{v / 1024:g}k" if v >= 1024 else f"{v:g}")
    fig, ax = plt.subplots(figsize=(FIGURE_WIDTH, 3.4))
    for name, color, label in (
        ("softmax", COLORS[1], "softmax layer: KV cache"),
        ("linear", COLORS[0], "Gated DeltaNet layer: state"),
    ):
        megabytes = [carried_bytes(t)[name] / 2**20 for t in tokens]
        ax.plot(tokens, megabytes, color=color, linewidth=1.8, label=label)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks([256, 2048, 16384, 131072])
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.minorticks_off()
    ax.set_xlabel("tokens in the context")
    ax.set_ylabel("MiB per layer")
    ax.set_title("One layer of Qwen3-Next-80B-A3B", color=INK)
    ax.grid(True, which="major")
    ax.legend()
    fig.tight_layout()
    return fig


def figures() -> dict:
    """Each committed figure's path -> a function drawing it from committed data."""
    import json

    from lab.parts.beyond_softmax_recall import RECALL_FIGURE, RECALL_FILE, recall_figure

    def load(path: Path) -> dict:
        return json.loads(path.read_text(encoding="utf-8"))

    return {
        COST_FIGURE: lambda: cost_figure(load(COST_FILE)),
        STATE_FIGURE: state_figure,
        RECALL_FIGURE: lambda: recall_figure(load(RECALL_FILE)),
    }


def main(argv: list[str] | None = None) -> int:
    from lab.parts import beyond_softmax_recall as recall
    from lab.shared.style import save_svg

    p = argparse.ArgumentParser(
        prog="python -m lab.beyond_softmax", description=__doc__.split("\n\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)
    cost = sub.add_parser("cost", help="forward time and memory per doubling of T")
    rec = sub.add_parser("recall", help="MQAR recall: softmax, linear, hybrid")
    sub.add_parser("figures", help="redraw the page's figures from the committed files")
    for parser, default in ((cost, COST_FILE), (rec, recall.RECALL_FILE)):
        parser.add_argument("--quick", action="store_true", help="seconds, for the tests")
        where = f"default {default.name}; --quick: under test-artifacts/"
        parser.add_argument("--out", type=Path, help=where)
        parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    recall.add_options(rec)
    args = p.parse_args(argv)
    if args.command == "figures":
        for path, draw in figures().items():
            save_svg(draw(), path)
            print(f"wrote {path}")
        return 0
    if args.out is None:  # a --quick run never overwrites the committed file
        default = COST_FILE if args.command == "cost" else recall.RECALL_FILE
        args.out = ARTIFACTS / "beyond-softmax-quick" / default.name if args.quick else default
    torch.set_num_threads(args.threads)
    if args.command == "cost":
        data = run_cost(QUICK if args.quick else FULL, command_line("lab.beyond_softmax", argv))
        write_json(args.out, data)
        print(cost_table(data))
        if args.out == COST_FILE:
            save_svg(cost_figure(data), COST_FIGURE)
            save_svg(state_figure(), STATE_FIGURE)
    else:
        data = recall.run(recall.settings_from(args), command_line("lab.beyond_softmax", argv))
        write_json(args.out, data)
        print(recall.table(data))
        if args.out == recall.RECALL_FILE:
            save_svg(recall.recall_figure(data), recall.RECALL_FIGURE)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/beyond-softmax.md and docs/sparse-attention.md by the build (hooks/results.py).


def cost_result() -> str:
    """The forward passes' CPU ms and peak memory per T, and how they were measured."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("beyond-softmax-cost.json")
    seq_lens = data["settings"]["seq_lens"]
    rows = [
        [
            LABELS[name],
            *(f"{c['cpu_ms']:.1f}" for c in cells),
            " ".join(f"x{f:.1f}" for f in per_doubling(cells)),
            f"{cells[-1]['peak_bytes'] / 2**20:.1f}",
        ]
        for name, cells in data["results"].items()
    ]
    header = ["forward pass", *(f"T={T}" for T in seq_lens), "x per doubling"]
    header.append(f"peak MiB at T={seq_lens[-1]}")
    note = measured_note(
        data, [f"median CPU ms of {data['settings']['repetitions']} runs, one thread"]
    )
    return f"{markdown_table(header, rows)}\n\n{note}"
