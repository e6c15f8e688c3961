"""What the new attention pieces cost: prefill CPU time per doubling of T, and cache bytes.

    python -m lab.todays_cost           # T = 512 .. 8192, the page's numbers (minutes)
    python -m lab.todays_cost --quick   # T = 512 .. 2048, C = 128, 1 round: seconds

Every piece of the today's-models pages behind the one layer protocol, at the sizes
of one small but realistic layer (C = 512, 8 heads), beside dense causal softmax at the
same sizes: a whole-sequence forward (a prefill) of B = 1 under no_grad, float32, one
thread. Each repeat times every piece once in turn (snippets.pages.measure.time_interleaved);
the result is the median CPU time (time.process_time, which does not count waiting for a
core on a busy machine). DeepSeek Sparse Attention and DeepSeek-V4's layers are timed in
their gathered form (snippets.layers.sparse_mla.sparse_gathered,
snippets.layers.compressed_attention.compressed_gathered), equal to their masked forward.

Cache bytes: what each layer's cache really holds after T positions, from the piece's
formula, checked against the tensors of its new_cache() (a LinearState for the linear
layers) after a cached forward at a few T past every window and block: a run whose
formula and cache disagree stops. PIECES is the one table of pieces: a new piece is one
more entry.
"""

import json
import statistics
import sys
import time

import torch

from lab.parts.todays_cost_pieces import FULL, PIECES, QUICK, build, held_bytes
from lab.shared import experiment
from lab.shared.common import note_load_after
from lab.shared.experiment import progress
from lab.shared.paths import RESULTS_DIR
from snippets.pages.measure import time_interleaved

SCHEMA = "attention-guide/todays-cost/1"
RESULT_FILE = RESULTS_DIR / "todays-cost.json"
FIGURE = RESULTS_DIR / "todays-cost.svg"
# The sub-quadratic pieces' bound: growth per doubling of T at most this, past PAST_T.
BOUND, PAST_T = 2.5, 2048
CHECK_T = {"full": [600, 1100], "quick": [600]}  # cached forwards: past windows, blocks


@torch.no_grad()
def check_cache_bytes(name: str, layer, sizes: dict, T: int) -> dict:
    """A cached forward of T positions (a prefill of T - 1, then one step): the bytes
    its cache holds, beside the piece's formula; a disagreement stops the run."""
    x = experiment.randn(1, T, sizes["C"], seed=T)
    cache = layer.new_cache(1, T)
    layer(x[:, : T - 1], cache=cache)
    layer(x[:, T - 1 :], cache=cache)
    held, formula = held_bytes(cache), PIECES[name].cache_bytes(sizes, T)
    if held != formula:
        raise AssertionError(
            f"{name}: its cache holds {held} bytes at T={T}, the formula says {formula}"
        )
    return {"T": T, "bytes": held}


def jobs(layers: dict, x: torch.Tensor) -> dict:
    """name -> a function of no arguments: that piece's forward on x."""

    def job(name, layer):
        run = PIECES[name].run
        return (lambda: run(layer, x)) if run is not None else (lambda: layer(x))

    return {name: job(name, layer) for name, layer in layers.items()}


def per_doubling(cells: list[dict], key: str = "cpu_ms") -> list[float]:
    """The factor from each T to the next (2T)."""
    return [round(b[key] / a[key], 2) for a, b in zip(cells, cells[1:], strict=False)]


@torch.no_grad()
def run(sizes: dict, checks: list[int], retries: int, names=None) -> tuple[dict, dict]:
    """Time every piece (of names) at every T, in turns; check every cache.
    -> (results, the caches checked)."""
    layers = {name: build(name, sizes) for name in names or PIECES}
    checked = {
        name: [check_cache_bytes(name, layer, sizes, T) for T in checks]
        for name, layer in layers.items()
        if PIECES[name].cache_bytes
    }
    results = {name: [] for name in layers}
    for T in sizes["seq_lens"]:
        x = experiment.randn(1, T, sizes["C"], seed=T)
        times = time_interleaved(
            jobs(layers, x), sizes["repetitions"], sizes["warmup"], retries=retries
        )
        for name, t in times.items():
            results[name].append(
                {
                    "T": T,
                    "cpu_ms": round(statistics.median(t["cpu_seconds"]) * 1e3, 3),
                    "wall_ms": round(statistics.median(t["seconds"]) * 1e3, 3),
                    "cpu_ms_samples": [round(s * 1e3, 3) for s in t["cpu_seconds"]],
                    "cache_bytes": PIECES[name].cache_bytes(sizes, T)
                    if PIECES[name].cache_bytes
                    else None,
                }
            )
        progress(
            f"T={T}: "
            + ", ".join(f"{n} {results[n][-1]['cpu_ms']:.0f}" for n in layers)
            + " CPU ms"
        )
    return results, checked


def summary(data: dict) -> dict:
    """name -> the numbers the page reads: growth per doubling, bytes per token (added
    over the last doubling: 0 for a capped cache) and at the largest T."""
    out = {}
    for name, cells in data["results"].items():
        a, b = cells[-2], cells[-1]
        if b["cache_bytes"] is None:  # a part of another piece
            a = b = {"cache_bytes": None, "T": 0}
            per_token = None
        else:
            per_token = round((b["cache_bytes"] - a["cache_bytes"]) / (b["T"] - a["T"]), 2)
        past = [f for c, f in zip(cells[1:], per_doubling(cells), strict=True) if c["T"] > PAST_T]
        out[name] = {
            "per_doubling": per_doubling(cells),
            "bytes_per_token": per_token,
            "bytes_at_largest": b["cache_bytes"],
            "largest_past": max(past, default=None),
        }
    return out


def human_bytes(n: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:g} B"


def table(path=RESULT_FILE) -> str:
    """The page's Markdown table from the committed result file, and how it was measured."""
    data = json.loads(path.read_text(encoding="utf-8"))
    s, m, sums = data["settings"], data["machine"], summary(data)
    first, last = s["seq_lens"][0], s["seq_lens"][-1]
    lines = [
        f"| piece | CPU ms, T = {first} | CPU ms, T = {last} | × per doubling of T | "
        f"cache bytes added per token | cache at T = {last} |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for name, cells in data["results"].items():
        growth = " · ".join(f"{f:.1f}" for f in sums[name]["per_doubling"])
        per_token, held = sums[name]["bytes_per_token"], sums[name]["bytes_at_largest"]
        cache = ("(the layer's)", "") if held is None else (f"{per_token:g}", human_bytes(held))
        lines.append(
            f"| {data['pieces'][name]['label']} | {cells[0]['cpu_ms']:.1f}"
            f" | {cells[-1]['cpu_ms']:.0f}"
            f" | {growth} | {cache[0]} | {cache[1]} |"
        )
    note = (
        f"`{data['command']}`, on {m['cpu_model']} ({m['cpu_count']} cores), torch {m['torch']}"
        f" with {m['torch_threads']} thread, {m['date'][:10]}; load average (1 min)"
        f" {m['load_1min_before']} before the run and {m['load_1min_after']} after; the run took"
        f" {data['elapsed_seconds']:.0f} s. Sizes: C = {s['C']}, H = {s['H']} heads of D = {s['D']}"
        f" (G = {s['G']} key/value heads), B = 1, float32. Each of {s['repetitions']} repeats"
        f" (after {s['warmup']} not kept) timed every piece once in turn; the numbers are medians"
        f" of CPU time (`time.process_time`, which does not count waiting for a core). The cache"
        f" bytes are each piece's formula, checked against the tensors its cache holds after a"
        f" cached forward at T = {', '.join(str(T) for T in data['settings']['cache_check_T'])}."
    )
    return "\n".join(lines) + '\n\n??? note "How this was measured"\n\n    ' + note + "\n"


PANELS = (
    ["dsa", "dsa_indexer", "v4_window", "v4_hca", "v4_csa"],
    ["gemma4_window", "gemma4_kv", "kda", "gated_deltanet", "lightning"],
)


def figure(data: dict):
    """CPU ms against T, log-log, two stacked panels, dense in both: the sparse and
    compressed pieces; the window, K=V and linear pieces (and any piece added later).
    Each panel's legend under it, so the figure is lab.shared.style's width, legible on a phone."""
    from lab.shared.style import COLORS, FIGURE_WIDTH, INK, growth_axes, pyplot

    plt = pyplot(FIGURE_WIDTH)
    seq_lens = data["settings"]["seq_lens"]
    known = {n for names in PANELS for n in names} | {"dense"}
    panels = [PANELS[0], [*PANELS[1], *(n for n in data["results"] if n not in known)]]
    panels = [[n for n in names if n in data["results"]] for names in panels]
    fig, axes = plt.subplots(
        4, 1, figsize=(FIGURE_WIDTH, 11.0), gridspec_kw={"height_ratios": [3, 1.25, 3, 1.5]}
    )
    for ax, key, names in zip(axes[::2], axes[1::2], panels, strict=True):
        ms = {n: [c["cpu_ms"] for c in data["results"][n]] for n in ["dense", *names]}
        ax.plot(
            seq_lens,
            ms["dense"],
            color=INK,
            marker="o",
            markersize=4,
            linewidth=2.4,
            label=data["pieces"]["dense"]["label"],
        )
        for i, name in enumerate(names):
            ax.plot(
                seq_lens,
                ms[name],
                color=COLORS[i % len(COLORS)],
                marker="^sDvP"[i % 5],
                markersize=5,
                linewidth=1.6,
                label=data["pieces"][name]["label"],
            )
        growth_axes(ax, seq_lens, ms["dense"][-1] * 2, min(v[-1] for v in ms.values()) / 2)
        ax.set_xticks(seq_lens, [f"{T // 1024}k" if T >= 1024 else str(T) for T in seq_lens])
        ax.set_ylabel("CPU ms per prefill\n(log scale)")
        ax.grid(True, which="major")
        key.axis("off")
        key.legend(*ax.get_legend_handles_labels(), loc="upper center", ncol=1, borderaxespad=0)
    fig.tight_layout(h_pad=0.4)
    return fig


def command() -> experiment.Command:
    cmd = experiment.Command("lab.todays_cost", __doc__)
    cmd.parser.add_argument(
        "-T",
        "--seq-lens",
        type=experiment.int_list(),
        metavar="'T ...'",
        help="sequence lengths (default 512 .. 8192; --quick 512 .. 2048)",
    )
    cmd.parser.add_argument("--repetitions", type=experiment.count, help="repeats kept (default 3)")
    cmd.parser.add_argument(
        "--retries",
        type=int,
        default=0,
        help="times a run may be taken again when it waited for a core (default 0:"
        " CPU time does not count the waiting)",
    )
    cmd.parser.add_argument(
        "--pieces",
        nargs="+",
        choices=list(PIECES),
        metavar="NAME",
        help=f"only these pieces (default: all of {', '.join(PIECES)})",
    )
    return cmd


def main(argv: list[str] | None = None) -> int:
    cmd = command()
    args = cmd.parse(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.seq_lens:
        sizes["seq_lens"] = sorted(set(args.seq_lens))
    if args.repetitions:
        sizes["repetitions"] = args.repetitions
    header = cmd.header(SCHEMA)
    started = time.perf_counter()
    checks = CHECK_T["quick" if args.quick else "full"]
    results, checked = run(sizes, checks, args.retries, args.pieces)
    data = {
        **note_load_after(header),
        "settings": {
            **sizes,
            "cache_check_T": checks,
            "retries": args.retries,
            "batch": 1,
            "dtype": "float32",
            "clock": "cpu",
            "mode": "a whole-sequence forward (prefill) under torch.no_grad()",
        },
        "pieces": {
            n: {
                "label": p.label,
                "growth": p.growth,
                "timed": f"{p.run.__module__}.{p.run.__name__}" if p.run else "forward",
            }
            for n, p in PIECES.items()
            if n in results
        },
        "elapsed_seconds": round(time.perf_counter() - started, 1),
        "cache_check": checked,
        "results": results,
    }
    for name, numbers in summary(data).items():
        data["pieces"][name].update(numbers)
    cmd.write(RESULT_FILE.name, data)
    cmd.write(FIGURE.name, figure(data))
    print(table(cmd.out / RESULT_FILE.name))
    progress(f"done in {data['elapsed_seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
