"""Sinks and streaming: the attention sink grown, broken by a rolling cache, and fixed.

    python -m lab.streaming --jobs 2          # docs/assets/results/streaming.json + SVG
    python -m lab.streaming --quick --out DIR # seconds: the suite's run, cached models

Trains the guide's GPT (RoPE, two layers of eight heads) on Bigram-Backcopy
(snippets.pages.tasks, Guo et al. 2024): every sequence opens with BOS, a token after a
trigger copies the token before the trigger, every other token follows a bigram
chain. Attention is needed after a trigger only; elsewhere a head has nothing to
do. Three models, same data and start: plain softmax, learned sink logits (gpt-oss)
and a sigmoid output gate (Qiu et al. 2025), for each of three seeds. For each: the
attention every head puts on BOS, at trigger and at other queries; then held-out
streams 16 times the training length W, read with a cache of everything, a rolling
cache of W (BOS dropped after W tokens), and rolling caches keeping the first 1, 2
or 4 tokens (StreamingLLM). Losses are excess nats over what the task's own rule
scores. Where the rolling cache and the one keeping BOS differ, it also measures
what each head adds to the stream in the two, away from triggers.
The models are lab/recipes/sink_models.py's; the quick run reads short streams with seed 0's,
cached by lab/model_cache.py.
"""

import concurrent.futures
import dataclasses
import sys
import time

import torch
import torch.nn.functional as F

from lab import model_cache
from lab.recipes.sink_models import FULL, MODELS, Setup, cache_file, chain, train_one, trained
from lab.shared.common import RESULTS_DIR, note_load_after
from lab.shared.experiment import Command, int_list, progress
from lab.shared.result_pages import from_text, load, measured_note, preformatted
from snippets.core.model import GPT
from snippets.pages.tasks import backcopy_best_losses, bigram_backcopy
from snippets.run.streaming import stream_logits

RESULT_FILE = RESULTS_DIR / "streaming.json"
PLOT_FILE = RESULTS_DIR / "streaming-sinks.svg"
SCHEMA = "attention-guide/streaming/3"
READERS = {  # name -> (what the page calls it, the sinks it keeps; None: no rolling)
    "full": ("one cache, nothing dropped", None),
    "rolling": ("rolling cache of W", 0),
    "sinks-1": ("rolling cache of W, 1 sink", 1),
    "sinks-2": ("rolling cache of W, 2 sinks", 2),
    "sinks-4": ("rolling cache of W, 4 sinks", 4),
}
SEEDS = (0, 1, 2)
QUICK = dataclasses.replace(FULL, eval_batch=16, streams=4, stream_factor=3)  # seed 0


@torch.no_grad()
def attention_on_bos(model: GPT, idx: torch.Tensor, n_triggers: int) -> dict:
    """Per layer and head, the weight on BOS (key 0) from queries in the second half
    of the window, at triggers (where a head must look back) and elsewhere; and, with
    learned sinks, the weight the sink takes (what the row is short of 1)."""
    V, T = model.config.vocab_size, idx.size(1)
    start = T // 2
    trigger = (idx[:, start:] >= V - n_triggers)[:, None]  # (B, 1, T - start)
    out = {"at_triggers": [], "elsewhere": [], "sink_share": []}
    for weights in model(idx, return_weights=True)[2]:  # L x (B, H, T, T)
        weights = weights[:, :, start:]  # (B, H, T - start, T)
        bos = weights[..., 0]  # (B, H, T - start)
        for key, where in (("at_triggers", trigger), ("elsewhere", ~trigger)):
            share = (bos * where).sum((0, 2)) / where.sum((0, 2))  # (H,)
            out[key].append([round(v, 4) for v in share.tolist()])
        sink = 1 - weights.sum(-1)  # (B, H, T - start): 0 without learned sinks
        out["sink_share"].append([round(v, 4) for v in sink.mean((0, 2)).tolist()])
    uniform = sum(1 / (t + 1) for t in range(start, T)) / (T - start)
    return {**out, "query_start": start, "uniform": round(uniform, 4)}


def bands(window: int, length: int) -> list[tuple[int, int]]:
    """Position bands [0, W), [W, 2W), [2W, 4W), ... up to the stream's length."""
    edges = [0, window]
    while edges[-1] < length:
        edges.append(min(2 * edges[-1], length))
    return list(zip(edges[:-1], edges[1:], strict=True))


@torch.no_grad()
def read_with_heads(model: GPT, x: torch.Tensor, window: int, sinks: int = 0):
    """stream_logits (B, N, V), and per layer what each head adds to the stream,
    (B, N, H, C): its slice of the output projection times its output (gated, if
    the model gates), recorded by a hook on every layer's projection."""
    heads = [[] for _ in model.blocks]

    def record(layer: int, H: int):
        def hook(proj, inputs, _):
            y = inputs[0][:, 0]  # (B, C): the heads side by side, one token
            B, C = y.shape
            w = proj.weight.view(C, H, C // H)  # (C out, H, D)
            heads[layer].append(torch.einsum("bhd,chd->bhc", y.view(B, H, C // H), w))

        return hook

    hooks = [
        block.attn.proj.register_forward_hook(record(layer, block.attn.n_head))
        for layer, block in enumerate(model.blocks)
    ]
    try:
        logits = stream_logits(model, x, window=window, sinks=sinks)
    finally:
        for hook in hooks:
            hook.remove()
    return logits, [torch.stack(per_step, dim=1) for per_step in heads]  # L x (B, N, H, C)


def head_change(rolling: list, kept: list, idle: torch.Tensor, W: int) -> dict:
    """What evicting BOS changes in each head's addition to the stream, away from
    triggers after the first window: mean |change| and mean |addition| with BOS kept,
    per layer and head; idle (B, N) marks the queries that are not triggers."""
    where = idle[:, W:]  # (B, N - W)
    change, size = [], []
    for a, b in zip(rolling, kept, strict=True):  # (B, N, H, C) each
        da = (a - b)[:, W:].norm(dim=-1)[where]  # (n, H)
        change.append([round(v, 4) for v in da.mean(0).tolist()])
        size.append([round(v, 4) for v in b[:, W:].norm(dim=-1)[where].mean(0).tolist()])
    return {"change": change, "with_bos": size}


def held_out(setup: Setup, seed: int):
    """The chain, held-out windows (for BOS attention) and streams with their best losses."""
    transitions = chain(setup, seed)
    W, nt = setup.context_length, setup.n_triggers
    generator = torch.Generator().manual_seed(seed + 1)
    windows = bigram_backcopy(setup.eval_batch, W, transitions, nt, generator)
    length = setup.stream_factor * W
    streams = bigram_backcopy(setup.streams, length + 1, transitions, nt, generator)
    best = backcopy_best_losses(streams, transitions, nt)  # (B, N)
    return transitions, windows, streams, best


def measure(setup: Setup, model: GPT, seed: int) -> dict:
    """The attention on BOS, the streams read every way, and the heads' change."""
    _, windows, streams, best = held_out(setup, seed)
    row = {"bos": attention_on_bos(model, windows, setup.n_triggers)}
    x, y = streams[:, :-1], streams[:, 1:]  # (B, N) each
    W, N = setup.context_length, x.size(1)
    spans = bands(W, N)
    row["excess"], added = {}, {}
    for reader, (_, sinks) in READERS.items():
        window, sinks = (N, 0) if sinks is None else (W, sinks)
        logits, heads = read_with_heads(model, x, window, sinks)
        if reader in ("rolling", "sinks-1"):
            added[reader] = heads
        losses = F.cross_entropy(logits.transpose(1, 2), y, reduction="none") - best
        row["excess"][reader] = [round(losses[:, a:b].mean().item(), 4) for a, b in spans]
    idle = x < setup.vocab_size - setup.n_triggers
    row["heads"] = head_change(added["rolling"], added["sinks-1"], idle, W)
    return row


def in_cache(setup: Setup, name: str, seed: int) -> bool:
    """Whether the model cache (local or committed) holds this model already."""
    file = cache_file(setup, name, seed)
    return (model_cache.TRAINED / file).is_file() or (model_cache.COMMITTED / file).is_file()


def one_model(setup: Setup, name: str, seed: int) -> dict:
    """Train one model (or load it from the cache), then measure it. The full setup's
    models are kept by lab/model_cache.py: a run stopped halfway resumes where it was."""
    torch.set_num_threads(1)  # in a worker process too: the same sums on every machine
    row = {"model": name, "seed": seed, "train_cpu_seconds": None}  # None: from the cache
    started = time.process_time()
    if setup.training() != FULL.training():  # a test's own sizes: never cached
        model = train_one(setup, name, seed)
    else:
        loaded = in_cache(setup, name, seed)
        model = trained(setup, name, seed)
        if loaded:
            started = None
    if started is not None:
        row["train_cpu_seconds"] = round(time.process_time() - started, 1)
    return {**row, **measure(setup, model, seed)}


def run(setup: Setup, header: dict, seeds, jobs: int = 1) -> dict:
    """The three models per seed, in `jobs` processes (the rows do not depend on how
    many), after the result's header (made before the run: the machine as it was)."""
    _, _, streams, best = held_out(setup, seeds[0])
    W, length = setup.context_length, streams.size(1) - 1
    tasks = [(setup, name, seed) for seed in seeds for name in MODELS]
    if jobs == 1:  # in this process: what the suite's quick run does
        models = [one_model(*task) for task in tasks]
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            models = list(pool.map(one_model, *zip(*tasks, strict=True)))
    for row in models:
        progress(f"{row['model']} seed {row['seed']}: {row['excess']}")
    note_load_after(header)
    return {
        **header,
        "setup": dataclasses.asdict(setup),
        "seeds": list(seeds),
        "window": W,
        "stream_length": length,
        "bands": [list(s) for s in bands(W, length)],
        "readers": {name: label for name, (label, _) in READERS.items()},
        "models": models,
    }


# ------------------------------------------------------------------ tables and figure


def by_model(data: dict) -> dict:
    """model name -> its rows, one per seed."""
    rows = {}
    for row in data["models"]:
        rows.setdefault(row["model"], []).append(row)
    return rows


def after_first_window(data: dict, row: dict, reader: str) -> float:
    """Excess nats of one row and reader, over the positions after the first window
    (inside it nothing has been dropped: every reader reads the same)."""
    spans = data["bands"][1:]
    sizes = [b - a for a, b in spans]
    excess = row["excess"][reader][1:]
    return sum(e * s for e, s in zip(excess, sizes, strict=True)) / sum(sizes)


def eviction_cost(data: dict, model: str, kept: str = "sinks-4") -> list[float]:
    """Per seed: what the rolling cache costs over one keeping sinks (reader `kept`)."""
    return [
        after_first_window(data, row, "rolling") - after_first_window(data, row, kept)
        for row in by_model(data)[model]
    ]


def _flat(rows: list[dict], *keys) -> list[float]:
    """Every head's value of rows[i][keys...], over seeds and layers."""
    values = []
    for row in rows:
        part = row
        for key in keys:
            part = part[key]
        values += [v for layer in part for v in layer]
    return values


def bos_table(data: dict) -> str:
    """Weight on BOS over heads and seeds, per model and layer: away from triggers
    (fewest, mean, most), at triggers (fewest); the learned sink's own share."""
    lines = [
        f"{'model':<14} {'layer':>5}   {'on BOS away from triggers':^22}   {'at triggers':>11}"
        f"   {'sink':>4}",
        f"{'':<14} {'':>5}   {'fewest':>6} {'mean':>6} {'most':>6}   {'fewest':>11}   {'mean':>4}",
    ]
    for name, rows in by_model(data).items():
        for layer in range(data["setup"]["n_layer"]):
            away, at, sink = (
                [v for row in rows for v in row["bos"][key][layer]]
                for key in ("elsewhere", "at_triggers", "sink_share")
            )
            share = f"{sum(sink) / len(sink):4.2f}" if name == "learned sinks" else "   -"
            lines.append(
                f"{name:<14} {layer:>5}   {min(away):6.2f} {sum(away) / len(away):6.2f} "
                f"{max(away):6.2f}   {min(at):11.2f}   {share}"
            )
    uniform = data["models"][0]["bos"]["uniform"]
    lines.append(f"even spread over the keys a query sees: {uniform:.3f}")
    return "\n".join(lines)


def loss_table(data: dict) -> str:
    """Excess nats per reader and model after the first window, mean over seeds."""
    models = by_model(data)
    width = max(len(v) for v in data["readers"].values())
    lines = [f"{'reader (W=' + str(data['window']) + ')':<{width}}  " +
             "  ".join(f"{n:>13}" for n in models)]  # fmt: skip
    for reader, label in data["readers"].items():
        cells = []
        for rows in models.values():
            mean = sum(after_first_window(data, r, reader) for r in rows) / len(rows)
            cells.append(f"{mean:>13.3f}")
        lines.append(f"{label:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def eviction_table(data: dict) -> str:
    """Per model and layer, away from triggers after the first window: how much evicting
    BOS changes what a head adds to the stream, beside what it adds with BOS kept (means
    over heads and seeds); per model, what evicting BOS costs per seed (the rolling cache
    minus one keeping 1 or 4 sinks, nats per token)."""
    lines = [
        f"{'model':<14} {'layer':>5}  {'head change':>11}  {'with BOS':>8}  "
        f"{'rolling - 1 sink':>20}  {'rolling - 4 sinks':>20}"
    ]
    for name, rows in by_model(data).items():
        costs = [" ".join(f"{round(c, 3) + 0.0:+.3f}" for c in eviction_cost(data, name, k))
                 for k in ("sinks-1", "sinks-4")]  # fmt: skip
        for layer in range(data["setup"]["n_layer"]):
            change = [v for row in rows for v in row["heads"]["change"][layer]]
            size = [v for row in rows for v in row["heads"]["with_bos"][layer]]
            cells = f"{costs[0]:>20}  {costs[1]:>20}" if layer == 0 else ""
            lines.append(
                f"{name:<14} {layer:>5}  {sum(change) / len(change):11.3f}  "
                f"{sum(size) / len(size):8.3f}  {cells}".rstrip()
            )
    lines.append(f"seeds {' '.join(str(s) for s in data['seeds'])}")
    return "\n".join(lines)


def sink_plot(data: dict):
    """Stacked at lab.shared.style's width: weight on BOS away from triggers, every head and seed;
    how much evicting BOS changes each head's addition to the stream; loss per reader."""
    from lab.shared.style import FIGURE_WIDTH, pyplot

    plt = pyplot(FIGURE_WIDTH)
    fig, (left, middle, right) = plt.subplots(
        3, 1, figsize=(FIGURE_WIDTH, 8.4), layout="constrained"
    )
    readers = list(data["readers"])
    models = by_model(data)
    for i, (name, rows) in enumerate(models.items()):
        color = f"C{i}"
        for panel, values in ((left, _flat(rows, "bos", "elsewhere")),
                              (middle, _flat(rows, "heads", "change"))):  # fmt: skip
            spread = [i + 0.6 * (j / max(len(values) - 1, 1) - 0.5) for j in range(len(values))]
            panel.scatter(spread, values, s=6, color=color, alpha=0.7)
        per_seed = [[after_first_window(data, r, k) for k in readers] for r in rows]
        means = [sum(col) / len(col) for col in zip(*per_seed, strict=True)]
        right.plot(range(len(readers)), means, marker="o", color=color, label=name)
    uniform = data["models"][0]["bos"]["uniform"]
    left.axhline(uniform, linestyle="--", linewidth=1, color="#808080")
    short = [n.replace("learned ", "").replace("output ", "") for n in models]
    left.set(xticks=range(len(models)), xticklabels=short, ylim=(0, 1.02),
             ylabel="weight on BOS", title="each head, off-trigger")  # fmt: skip
    middle.set(xticks=range(len(models)), xticklabels=short,
               ylabel="|change| of a head's output", title="BOS evicted")  # fmt: skip
    right.set(xticks=range(len(readers)), xticklabels=["all", "W", "+1", "+2", "+4"],
              ylabel="excess nats", title="long streams")  # fmt: skip
    for panel in (middle, right):  # zero to a nat: linear below 1e-3, then logarithmic
        panel.set_yscale("symlog", linthresh=1e-3)
        panel.set_ylim(bottom=0)
    right.legend(frameon=False)
    right.grid(True)
    return fig


def main(argv: list[str] | None = None) -> int:
    """Run the experiment, write the result file and figure, print the tables."""
    # One thread by default: the same sums in the same order on every machine.
    cmd = Command("lab.streaming", __doc__, threads=1, jobs=1)
    cmd.parser.add_argument("--seeds", type=int_list(0), help="default: 0 1 2 (quick: 0)")
    args = cmd.parse(argv)
    seeds = args.seeds or ([0] if args.quick else list(SEEDS))
    setup = QUICK if args.quick else FULL
    data = run(setup, cmd.header(SCHEMA), seeds, args.jobs)
    cmd.write(RESULT_FILE.name, data)
    if not args.quick:
        cmd.write(PLOT_FILE.name, sink_plot(data))
    print(bos_table(data))
    print()
    print(loss_table(data))
    print()
    print(eviction_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the pages' results
# Rendered into docs/masks.md and docs/taming-in-depth.md by the build (hooks/results.py).


def _note(data: dict) -> str:
    s = data["setup"]
    setup = ", ".join(f"{k}={v}" for k, v in s.items() if isinstance(v, int | float | str))
    return measured_note(data, [f"setup: {setup}"], seeds=data["seeds"])


def loss_result() -> str:
    """Excess nats per reader and model (docs/masks.md), and how it was measured."""
    data = load("streaming.json")
    return f"{from_text(loss_table(data))}\n\n{_note(data)}"


def bos_result() -> str:
    return preformatted(bos_table(load("streaming.json")))


def eviction_result() -> str:
    return preformatted(eviction_table(load("streaming.json")))


def sinks_result() -> str:
    """The three tables of the sink experiment for docs/taming-in-depth.md, one note."""
    data = load("streaming.json")
    return (
        f"Weight on BOS:\n\n{bos_result()}\n\n"
        "Excess nats over the task's own rule, after the first window:\n\n"
        f"{from_text(loss_table(data))}\n\nWhat evicting BOS changes:\n\n{eviction_result()}"
        f"\n\n{_note(data)}"
    )
