"""The taming-in-depth page's experiment A and timings: logit growth, and what each piece costs.

    python -m lab.taming_softmax growth --jobs 3  # docs/assets/results/taming-growth.json + SVG
    python -m lab.taming_softmax growth --quick --out DIR   # seconds: the suite's run
    python -m lab.taming_softmax timing           # docs/assets/results/taming-timing.json

growth: the guide's GPT learns the induction data (snippets.pages.induction.repeated_tokens)
with AdamW and no weight decay, once per learning rate, plain, with QK-norm and with
soft-capped scores. Reports the largest scaled attention logit q.k / sqrt(D) of a
held-out batch (before any cap) and the held-out loss, against the learning rate.
Wortsman et al. 2023 predict: without QK-norm the logits grow with the learning rate
until training diverges; with it they stay bounded and the model learns.

timing: each piece in TamedAttention against the plain fused layer, forward and
forward+backward, in turns (snippets.pages.measure.time_interleaved), one thread.
"""

import concurrent.futures
import dataclasses
import math
import statistics
import sys
import time

import torch

from lab.shared.common import RESULTS_DIR, note_load_after
from lab.shared.experiment import Command, progress
from snippets.core.attention import CausalSelfAttention, causal_mask
from snippets.core.model import GPT, GPTConfig
from snippets.core.positions import apply_position
from snippets.layers.taming import TamedAttention, TamedSpec, soft_cap_score_mod
from snippets.pages.induction import repeated_tokens
from snippets.pages.measure import time_interleaved
from snippets.run.train import fit

GROWTH_FILE = RESULTS_DIR / "taming-growth.json"
GROWTH_PLOT = RESULTS_DIR / "taming-growth.svg"
TIMING_FILE = RESULTS_DIR / "taming-timing.json"
GROWTH_SCHEMA = "attention-guide/taming-growth/1"
TIMING_SCHEMA = "attention-guide/taming-timing/1"
CAP = 30.0  # the soft cap of the sweep: well above what a learning model needs (~10)
VARIANTS = {  # name -> the pieces of every layer (a TamedSpec); {}: the plain layer
    "plain": {},
    "qk-norm": {"qk_norm": "head"},
    "soft-cap": {"soft_cap": CAP},
}


@dataclasses.dataclass(frozen=True)
class Growth:
    """Everything the sweep depends on besides the variant and the learning rate."""

    lrs: tuple = (1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1)
    vocab_size: int = 32
    context_length: int = 64
    n_layer: int = 2
    n_head: int = 4
    n_embed: int = 64
    steps: int = 300
    batch_size: int = 16
    warmup_steps: int = 30  # then a cosine to lr / 10
    min_period: int = 4
    max_period: int = 16
    eval_batch: int = 64
    seed: int = 0


FULL = Growth()
QUICK = Growth(
    lrs=(3e-1,), context_length=16, n_layer=1, n_head=2, n_embed=16, steps=40,
    batch_size=8, warmup_steps=4, max_period=6, eval_batch=8,
)  # fmt: skip


@torch.no_grad()
def largest_logit(model: GPT, idx: torch.Tensor) -> float:
    """The largest scaled score q.k / sqrt(D) any layer gives a visible key, before a cap."""
    x = model.embed(idx)  # (B, T, C)
    B, T = idx.shape
    visible = causal_mask(T)  # (T, T)
    largest = -math.inf
    for block in model.blocks:
        attn, h = block.attn, block.ln1(x)
        C = h.size(-1)
        H, D = attn.n_head, C // attn.n_head
        q, k, _ = (t.view(B, T, H, D).transpose(1, 2) for t in attn.qkv(h).split(C, -1))
        if getattr(attn, "norm", None) is not None:
            q, k = attn.norm(q, k)
        q, k = apply_position(q, k, attn.position)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, T, T)
        largest = max(largest, scores.masked_fill(~visible, -math.inf).max().item())
        x = block(x)
    return largest


def train_one(setup: Growth, variant: str, lr: float) -> dict:
    """One model at one peak learning rate: its row of the sweep."""
    C, H, T, pieces = setup.n_embed, setup.n_head, setup.context_length, VARIANTS[variant]
    layers = (TamedSpec(C, H, T, position="rope", **pieces),) * setup.n_layer
    config = GPTConfig(
        vocab_size=setup.vocab_size, context_length=T, n_embed=C, n_head=H,
        n_layer=setup.n_layer, position="none" if pieces else "rope",  # RoPE: inside
        layers=layers if pieces else None,
    )  # fmt: skip
    torch.manual_seed(setup.seed)  # the same start for every variant and rate
    model = GPT(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(setup.seed)  # the same batches
    T, V = setup.context_length, setup.vocab_size
    periods = (setup.min_period, setup.max_period)
    started = time.process_time()

    def rows():
        idx = repeated_tokens(setup.batch_size, T + 1, V, *periods, generator)
        return [(idx[:, :-1], idx[:, 1:])]

    schedule = (lr, lr / 10, setup.warmup_steps, setup.steps)
    steps = fit(model, optimizer, rows, schedule, range(setup.steps), 1.0)
    losses = [loss for _, _, loss, _ in steps]
    held_out = torch.Generator().manual_seed(setup.seed + 1)
    idx = repeated_tokens(setup.eval_batch, T + 1, V, *periods, held_out)
    model.eval()
    with torch.no_grad():
        _, loss = model(idx[:, :-1], idx[:, 1:])
    logit = largest_logit(model, idx[:, :-1])
    return {
        "variant": variant,
        "lr": lr,
        "loss": round(loss.item(), 4) if math.isfinite(loss.item()) else None,
        "largest_logit": float(f"{logit:.4g}") if math.isfinite(logit) else None,
        "train_loss_last": round(statistics.fmean(losses[-20:]), 4),
        "cpu_seconds": round(time.process_time() - started, 1),
    }


def _train_one_thread(setup: Growth, variant: str, lr: float) -> dict:
    torch.set_num_threads(1)  # in a worker process too: the same sums on every machine
    return train_one(setup, variant, lr)


def run_growth(setup: Growth, header: dict, jobs: int = 1) -> dict:
    """Every (learning rate, variant) model, in `jobs` processes (each its own seed
    and batches, so the rows do not depend on how many run at once)."""
    runs = [(lr, variant) for lr in setup.lrs for variant in VARIANTS]
    if jobs == 1:  # in this process: what the suite's quick run does
        rows = [train_one(setup, v, lr) for lr, v in runs]
    else:
        with concurrent.futures.ProcessPoolExecutor(jobs) as pool:
            futures = [pool.submit(_train_one_thread, setup, v, lr) for lr, v in runs]
            rows = [future.result() for future in futures]
    for row in rows:
        progress(f"lr {row['lr']:g} {row['variant']}: {row}")
    note_load_after(header)
    return {
        **header,
        "setup": dataclasses.asdict(setup),
        "cap": CAP,
        "chance_loss": round(math.log(setup.vocab_size), 4),
        "variants": list(VARIANTS),
        "rows": rows,
    }


def growth_table(data: dict) -> str:
    """A row per learning rate: each variant's held-out loss and largest logit."""
    names = data["variants"]
    head = f"{'lr':>6}  " + "  ".join(f"{n + ' loss':>14}  {'max logit':>9}" for n in names)
    lines = [head]
    for lr in data["setup"]["lrs"]:
        cells = []
        for name in names:
            row = next(r for r in data["rows"] if r["lr"] == lr and r["variant"] == name)
            loss = "nan" if row["loss"] is None else f"{row['loss']:.2f}"
            logit = "inf" if row["largest_logit"] is None else f"{row['largest_logit']:.3g}"
            cells.append(f"{loss:>14}  {logit:>9}")
        lines.append(f"{lr:>6g}  " + "  ".join(cells))
    lines.append(f"chance: ln {data['setup']['vocab_size']} = {data['chance_loss']:.2f}")
    return "\n".join(lines)


def growth_plot(data: dict):
    """Two panels against the learning rate, stacked (lab.shared.style's width): the largest
    logit above the held-out loss."""
    from lab.shared.style import FIGURE_WIDTH, pyplot

    plt = pyplot(FIGURE_WIDTH)
    fig, (left, right) = plt.subplots(
        2, 1, figsize=(FIGURE_WIDTH, 5.6), sharex=True, layout="constrained"
    )
    for name in data["variants"]:
        rows = [r for r in data["rows"] if r["variant"] == name]
        lrs = [r["lr"] for r in rows]
        left.plot(lrs, [r["largest_logit"] for r in rows], marker="o", label=name)
        right.plot(lrs, [r["loss"] for r in rows], marker="o", label=name)
    left.set(xscale="log", yscale="log", title="largest attention logit")
    right.axhline(data["chance_loss"], linestyle="--", linewidth=1, color="#808080")
    right.text(data["setup"]["lrs"][0], data["chance_loss"], " chance", va="bottom")
    right.set(xscale="log", xlabel="peak learning rate", title="held-out loss")
    left.legend(frameon=False)
    for ax in (left, right):
        ax.grid(True)
    return fig


# ------------------------------------------------------------------ timing

PIECES = {  # name -> TamedAttention options; "plain" is CausalSelfAttention
    "qk-norm per head": {"qk_norm": "head"},
    "qk-norm all heads": {"qk_norm": "all"},
    "soft-cap (scores)": {"soft_cap": CAP},
    "sinks (SDPA)": {"sinks": True},
    "gate per channel": {"gate": "elementwise"},
    "gate per head": {"gate": "head"},
}


def _flex_capped(layer: TamedAttention, block_mask):
    """Inference through FlexAttention: the cap as a score_mod, no (T, T) scores."""
    from torch.nn.attention.flex_attention import flex_attention

    # Static shapes: compiled with dynamic=True (the masks page's way), this score_mod
    # fails to lower in torch 2.13 ("unbacked_bindings").
    flex, score_mod = torch.compile(flex_attention), soft_cap_score_mod(CAP)

    def forward(x):
        q, k, v = layer.project(x)
        q, k = apply_position(q, k, layer.position)
        y = flex(q, k, v, score_mod=score_mod, block_mask=block_mask)  # (B, H, T, D)
        B, H, T, D = y.shape
        return layer.proj(y.transpose(1, 2).reshape(B, T, H * D))

    return forward


def _time_size(B: int, T: int, n_head: int, n_embed: int, repetitions: int) -> list[dict]:
    """Every layer at one (B, T), forward and forward+backward, in turns."""
    from lab.masks import block_mask_for

    torch.manual_seed(0)
    x = torch.randn(B, T, n_embed)
    layers = {"plain": CausalSelfAttention(n_head, n_embed, T, position="rope")}
    for name, options in PIECES.items():
        layers[name] = TamedAttention(n_head, n_embed, T, position="rope", **options)
    capped = _flex_capped(layers["soft-cap (scores)"], block_mask_for(_causal, T))

    def step(layer):
        layer(x).square().mean().backward()

    rows = []
    for mode in ("forward", "forward+backward"):
        if mode == "forward":
            jobs = {n: (lambda m=m: m(x)) for n, m in layers.items()}
            jobs["soft-cap (FlexAttention)"] = lambda: capped(x)
            with torch.no_grad():
                timed = time_interleaved(jobs, repetitions, warmup=3, retries=2)
        else:
            jobs = {n: (lambda m=m: step(m)) for n, m in layers.items()}
            timed = time_interleaved(jobs, repetitions, warmup=3, retries=2)
        plain = statistics.median(timed["plain"]["cpu_seconds"]) * 1e3
        for name, t in timed.items():
            ms = statistics.median(t["cpu_seconds"]) * 1e3
            rows.append({"B": B, "T": T, "mode": mode, "layer": name, "cpu_ms": round(ms, 3),
                         "vs_plain": round(ms / plain, 2), "retaken": t["retaken"]})  # fmt: skip
        progress(f"B={B} T={T} {mode}: done")
    return rows


def run_timing(sizes: list[tuple[int, int]], n_head, n_embed, repetitions, header) -> dict:
    """Each piece's layer against the plain one at each (B, T): median CPU ms."""
    rows = []
    for B, T in sizes:
        rows += _time_size(B, T, n_head, n_embed, repetitions)
    note_load_after(header)
    settings = {"n_head": n_head, "n_embed": n_embed, "repetitions": repetitions, "threads": 1}
    return {**header, "settings": settings, "sizes": [list(s) for s in sizes], "rows": rows}


def _causal(b, h, q_idx, kv_idx):
    return kv_idx <= q_idx


def timing_table(data: dict) -> str:
    """Median CPU ms per layer call, and the ratio to the plain layer."""
    lines = []
    for B, T in data["sizes"]:
        rows = [r for r in data["rows"] if r["B"] == B and r["T"] == T]
        names = list(dict.fromkeys(r["layer"] for r in rows))
        lines.append(f"B={B}, T={T}  {'forward':>18}  {'forward+backward':>18}")
        for name in names:
            cells = []
            for mode in ("forward", "forward+backward"):
                row = next((r for r in rows if r["layer"] == name and r["mode"] == mode), None)
                cells.append(" " * 18 if row is None else
                             f"{row['cpu_ms']:>8.2f} ms x{row['vs_plain']:<5.2f}")  # fmt: skip
            lines.append(f"{name:<26}  " + "  ".join(cells))
        lines.append("")
    return "\n".join(lines).rstrip()


def command() -> Command:
    cmd = Command("lab.taming_softmax", __doc__, threads=1, subcommands=True)
    cmd.subcommand("growth", help="the learning-rate sweep", quick=True, jobs=1)
    cmd.subcommand("timing", help="each piece against the plain layer", quick=True)
    return cmd


def main(argv: list[str] | None = None) -> int:
    cmd = command()
    args = cmd.parse(argv)
    if args.command == "growth":
        data = run_growth(QUICK if args.quick else FULL, cmd.header(GROWTH_SCHEMA), args.jobs)
        cmd.write(GROWTH_FILE.name, data)
        if not args.quick:
            cmd.write(GROWTH_PLOT.name, growth_plot(data))
        print(growth_table(data))
    else:
        sizes = [(2, 32)] if args.quick else [(32, 64), (4, 512)]
        header = cmd.header(TIMING_SCHEMA)
        data = run_timing(sizes, 4, 64, 3 if args.quick else 30, header)
        cmd.write(TIMING_FILE.name, data)
        print(timing_table(data))
    return 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------ the page's results
# Rendered into docs/taming-in-depth.md by the build (hooks/results.py).


def timing_result() -> str:
    """Median CPU ms per layer call and the ratio to the plain layer, a table per size."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("taming-timing.json")
    tables = []
    for B, T in data["sizes"]:
        rows = [r for r in data["rows"] if r["B"] == B and r["T"] == T]
        out = []
        for name in dict.fromkeys(r["layer"] for r in rows):
            cells = [name]
            for mode in ("forward", "forward+backward"):
                row = next((r for r in rows if r["layer"] == name and r["mode"] == mode), None)
                cells += ["", ""] if row is None else [
                    f"{row['cpu_ms']:.2f}", f"x{row['vs_plain']:.2f}"
                ]  # fmt: skip
            out.append(cells)
        header = ["layer", "forward, ms", "vs plain", "fwd+bwd, ms", "vs plain"]
        tables.append(markdown_table(header, out, f"B={B}, T={T}"))
    s = data["settings"]
    note = measured_note(
        data,
        [f"C={s['n_embed']}, H={s['n_head']}, {s['threads']} thread; median CPU time"],
    )
    return "\n\n".join(tables) + f"\n\n{note}"


def growth_result() -> str:
    """Held-out loss and largest logit per learning rate and variant; how it ran."""
    from lab.shared.result_pages import load, markdown_table, measured_note

    data = load("taming-growth.json")
    names = data["variants"]
    rows = []
    for lr in data["setup"]["lrs"]:
        cells = [f"{lr:g}"]
        for name in names:
            row = next(r for r in data["rows"] if r["lr"] == lr and r["variant"] == name)
            cells.append("nan" if row["loss"] is None else f"{row['loss']:.2f}")
            logit = row["largest_logit"]
            cells.append("inf" if logit is None else f"{logit:.3g}")
        rows.append(cells)
    header = ["lr"] + [f"{n} {what}" for n in names for what in ("loss", "max logit")]
    table = markdown_table(header, rows)
    cpu = sum(row["cpu_seconds"] for row in data["rows"])
    note = measured_note(data, [f"{len(data['rows'])} models"], seconds=cpu, clock="CPU")
    chance = f"Chance: \\(\\ln {data['setup']['vocab_size']}\\) = {data['chance_loss']:.2f} nats."
    return f"{table}\n\n{chance}\n\n{note}"
