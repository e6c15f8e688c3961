"""What attention costs, measured: time and peak memory of three implementations.

    python -m snippets.bench attention          # the page's numbers, a few minutes
    python -m snippets.bench attention --quick  # small sizes, seconds (the tests)
    python -m snippets.bench overhead           # CausalSelfAttention vs inline ops

`attention` prints tables and writes a JSON result file and two SVG plots;
`overhead` prints a table and writes a JSON result file. Needs only torch and
snippets/attention.py: the plots are SVG text written with the standard library.
Shape letters as in snippets/attention.py: B batch, T sequence length, C channels,
H heads, D head size. Written for Linux; on macOS it runs without measuring how
busy the machine is.
"""

# --8<-- [start:imports]
import argparse
import contextlib
import datetime
import functools
import json
import math
import os
import platform
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from xml.sax.saxutils import escape

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from snippets.attention import CausalSelfAttention, MultiHeadAttention

# --8<-- [end:imports]

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "docs" / "assets" / "results"  # the committed results
QUICK_DIR = ROOT / "test-artifacts" / "bench-quick"  # --quick, ignored by git
SCHEMA = "attention-guide/attention-cost/1"
OVERHEAD_SCHEMA = "attention-guide/attention-overhead/1"
MODES = ("forward", "forward_backward")
MODE_LABELS = {"forward": "forward", "forward_backward": "forward+backward"}


# --8<-- [start:variants]
VARIANTS = ("per-head", "manual", "sdpa")
VARIANT_LABELS = {"per-head": "per-head", "manual": "manual", "sdpa": "SDPA"}


def make_variants(n_head: int, n_embed: int, T: int, seed: int = 0):
    """The three implementations, sharing one set of weights.

    - per-head: MultiHeadAttention, H Head modules one after another, each
      materialising its own (B, T, T) scores and weights.
    - manual: CausalSelfAttention(x, return_weights=True), all heads in one
      batched matmul, softmax written out: (B, H, T, T) scores and weights.
    - sdpa: CausalSelfAttention(x), F.scaled_dot_product_attention with
      is_causal=True, a fused kernel that never holds a (T, T) matrix.

    Args:
        n_head: H. n_embed: C, divisible by H. T: the sequence length.
        seed: seed of the weights.

    Returns:
        A dict of calls x (B, T, C) -> (B, T, C), and the two modules, whose
        gradients the caller resets between runs.
    """
    torch.manual_seed(seed)
    # context_length=T: the tril buffers are (T, T), made before any measurement.
    mha = MultiHeadAttention(n_head, n_embed, context_length=T)
    csa = CausalSelfAttention.from_multihead(mha)  # the same function, batched

    def manual(x):
        out, _weights = csa(x, return_weights=True)  # weights made, then dropped
        return out

    calls = {"per-head": mha, "manual": manual, "sdpa": csa}
    return calls, (mha, csa)


def forward(call, x: torch.Tensor) -> None:
    """Inference: no autograd graph, so intermediates are freed as soon as used."""
    with torch.no_grad():
        call(x)


def forward_backward(call, x: torch.Tensor, grad_out: torch.Tensor) -> None:
    """A training step minus the optimizer: autograd keeps what backward needs."""
    call(x).backward(grad_out)


# --8<-- [end:variants]


# --8<-- [start:peak_memory]
@contextlib.contextmanager
def _stderr_silenced():
    """The profiler logs a line to file descriptor 2 when it starts and stops."""
    sys.stderr.flush()
    saved = os.dup(2)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def peak_memory(fn) -> dict:
    """Run fn() once and measure the tensor memory it needs.

    With profile_memory=True, torch's CPU allocator reports every allocation and
    free to the profiler. Replayed in time order, the events give the bytes of
    tensors alive at each moment, counted from what was alive before fn().

    Returns:
        {"peak_bytes": the most bytes alive at once,
         "largest_allocation_bytes": the largest single allocation}.
    """
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _stderr_silenced():
        prof.start()
    try:
        fn()
    finally:
        with _stderr_silenced():
            prof.stop()
    # The raw event list keeps the timeline; prof.events() would instead add each
    # allocation to the operator that made it.
    events = prof.profiler.kineto_results.events()
    events = [e for e in events if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())  # stable: ties keep recorded order
    live = peak = largest = 0
    for event in events:
        live += event.nbytes()  # > 0 for an allocation, < 0 for a free
        peak = max(peak, live)
        largest = max(largest, event.nbytes())
    return {"peak_bytes": peak, "largest_allocation_bytes": largest}


# --8<-- [end:peak_memory]


# --8<-- [start:page_faults]
def page_faults(fn) -> int:
    """Run fn() once; return the minor page faults it caused.

    A minor fault is the first touch of a page the process got from the
    operating system: the kernel maps a zeroed page there, which takes time.
    """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # all threads
    fn()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


# --8<-- [end:page_faults]


# --8<-- [start:timing]
MAX_WAITED = 0.05  # a run whose threads waited longer for a CPU is taken again


def waiting_seconds() -> float:
    """Seconds this process's threads spent ready to run but waiting for a CPU.

    Linux counts it per thread in /proc/self/task/*/schedstat (second field, ns);
    elsewhere this returns 0 and no run is ever taken again.
    """
    total = 0
    for stat in Path("/proc/self/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


def time_interleaved(
    jobs: dict, repetitions: int, warmup: int, prepare=None, retries=0
):
    """Time the jobs taking turns in rotating order: A B C, B C A, C A B, ...

    Taking turns spreads slow drifts of the machine (clock speed, other
    processes) over all jobs instead of penalising one of them. A run during
    which our threads waited for a CPU (another process had it) for more than
    MAX_WAITED of its time is taken again, up to `retries` times.

    Args:
        jobs: name -> function of no arguments.
        repetitions: rounds kept. warmup: rounds run first and thrown away.
        prepare: run before each job, outside the clock.
        retries: how often one run may be taken again.

    Returns:
        name -> {"seconds": [one per kept round], "waited": [the share of
        each kept run spent waiting for a CPU], "retaken": runs taken again}.
    """
    names = list(jobs)
    result = {name: {"seconds": [], "waited": [], "retaken": 0} for name in names}
    for round_ in range(warmup + repetitions):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            for attempt in range(retries + 1):
                if prepare is not None:
                    prepare()
                waited_before = waiting_seconds()
                start = time.perf_counter()
                jobs[name]()
                seconds = time.perf_counter() - start
                waited = waiting_seconds() - waited_before
                waited = max(0.0, waited) / max(seconds, 1e-9)  # share of the run
                if waited <= MAX_WAITED or attempt == retries:
                    break
                result[name]["retaken"] += 1
            if round_ >= warmup:
                result[name]["seconds"].append(seconds)
                result[name]["waited"].append(waited)
    return result


# --8<-- [end:timing]


# --8<-- [start:inline]
def inline_forward(csa: CausalSelfAttention, x: torch.Tensor) -> torch.Tensor:
    """CausalSelfAttention.forward without the module: same ops, same weights."""
    B, T, C = x.shape
    H, D = csa.n_head, C // csa.n_head
    qkv = F.linear(x, csa.qkv.weight)  # (B, T, C) -> (B, T, 3C)
    q, k, v = qkv.split(C, dim=-1)  # 3 x (B, T, C)
    q = q.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    k = k.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    v = v.view(B, T, H, D).transpose(1, 2)  # (B, T, C) -> (B, H, T, D)
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, H, T, D)
    y = y.transpose(1, 2).contiguous().view(B, T, C)  # -> (B, T, C)
    return F.linear(y, csa.proj.weight, csa.proj.bias)  # (B, T, C)


# --8<-- [end:inline]


def score_bytes(batch: int, n_head: int, T: int, dtype=torch.float32) -> int:
    """Bytes of one (B, H, T, T) score tensor: B * H * T * T * 4 in float32."""
    return batch * n_head * T * T * torch.empty((), dtype=dtype).element_size()


# ------------------------------------------------------------------ measuring


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _randn(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _cpu_seconds() -> tuple[float, float] | None:
    """CPU seconds used since boot by all processes, and by this one (Linux)."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields)
    except (OSError, ValueError):
        return None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    busy = user + nice + system + irq + softirq + steal
    return busy / os.sysconf("SC_CLK_TCK"), usage.ru_utime + usage.ru_stime


def _others_share(before, after, seconds: float) -> float | None:
    """Share of all cores that other processes (or the hypervisor) used."""
    if before is None or after is None or seconds <= 0:
        return None
    others = (after[0] - before[0]) - (after[1] - before[1])
    return round(max(0.0, others) / (seconds * (os.cpu_count() or 1)), 3)


def machine_info() -> dict:
    """Where the numbers come from: enough to tell two machines apart."""
    cpu_model, memory_gib = "unknown", None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory_gib = round(int(line.split()[1]) / 2**20, 1)
    now = datetime.datetime.now(datetime.UTC)
    return {
        "platform": platform.platform(),
        "cpu_model": cpu_model,
        "cpu_count": os.cpu_count(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "page_size": os.sysconf("SC_PAGE_SIZE"),
        # 1-minute load average per core: near 0 idle, 1 with every core busy.
        "load_per_core": round(os.getloadavg()[0] / (os.cpu_count() or 1), 2),
        "date": now.isoformat(timespec="seconds"),
    }


def _ms(seconds: list[float]) -> list[float]:
    return [round(s * 1e3, 4) for s in seconds]


def run_attention(seq_lens, heads, batch, n_embed, repetitions, warmup, retries):
    """Peak memory and interleaved timings of every variant and mode.

    For each head count and T, every variant and mode (six jobs): one profiled
    run for the memory, one run counting page faults, then the timed rounds,
    the six jobs taking turns.

    Returns:
        One dict per variant, head count and T (see attention-cost.json).
    """
    configs = [(n_head, T) for n_head in heads for T in seq_lens]
    results = []
    started = time.perf_counter()
    for i, (n_head, T) in enumerate(configs, 1):
        calls, modules = make_variants(n_head, n_embed, T)
        x = _randn(batch, T, n_embed, seed=1)
        grad_out = _randn(batch, T, n_embed, seed=2)
        jobs = {}
        for v in VARIANTS:
            jobs[v, "forward"] = functools.partial(forward, calls[v], x)
            jobs[v, "forward_backward"] = functools.partial(
                forward_backward, calls[v], x, grad_out
            )

        def reset_grads(modules=modules):
            for module in modules:
                module.zero_grad(set_to_none=True)

        cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
        memory, faults = {}, {}
        for name, job in jobs.items():  # these two runs also warm every job up
            reset_grads()
            memory[name] = peak_memory(job)
            reset_grads()
            faults[name] = page_faults(job)
        timed = time_interleaved(jobs, repetitions, warmup, reset_grads, retries)
        seconds = time.perf_counter() - wall_before
        others = _others_share(cpu_before, _cpu_seconds(), seconds)
        for v in VARIANTS:
            row = {
                "variant": v,
                "n_head": n_head,
                "seq_len": T,
                "score_bytes": score_bytes(batch, n_head, T),
                # Measuring this size (all variants) took `seconds`, during which
                # other processes used this share of the machine's CPU time.
                "seconds": round(seconds, 2),
                "others_cpu_share": others,
            }
            for mode in MODES:
                ms = _ms(timed[v, mode]["seconds"])
                row[mode] = {
                    "median_ms": round(statistics.median(ms), 4),
                    "samples_ms": ms,
                    "waited": [round(w, 3) for w in timed[v, mode]["waited"]],
                    "retaken": timed[v, mode]["retaken"],
                    **memory[v, mode],
                    "page_faults": faults[v, mode],
                }
            results.append(row)
        summary = []
        for r in results[-len(VARIANTS) :]:
            cell = r["forward_backward"]
            summary.append(
                f"{VARIANT_LABELS[r['variant']]} {cell['median_ms']:.1f} ms"
                f" {cell['peak_bytes'] / 2**20:.1f} MiB"
            )
        elapsed = time.perf_counter() - started
        _progress(
            f"[{i}/{len(configs)}] H={n_head} T={T} forward+backward: "
            f"{'  '.join(summary)}"
            f" ({elapsed:.0f} s)"
        )
    return results


def run_overhead(
    seq_lens, n_head, batch, n_embed, repetitions, warmup, sample_s, retries
):
    """Median time of CausalSelfAttention.forward and inline_forward, no_grad.

    Each sample times a loop of calls lasting about sample_s seconds, so that
    neither the clock's resolution nor the loop matters; module and inline take
    turns, sample by sample.
    """
    results = []
    for T in seq_lens:
        torch.manual_seed(0)
        csa = CausalSelfAttention(n_head, n_embed, context_length=T)
        x = _randn(batch, T, n_embed, seed=1)
        with torch.no_grad():
            # The same ops on the same tensors: the same numbers, bit for bit.
            torch.testing.assert_close(
                csa(x), inline_forward(csa, x), rtol=0, atol=0
            )
            start, calls = time.perf_counter(), 0
            while time.perf_counter() - start < sample_s / 2:
                csa(x)
                calls += 1
            loops = max(1, 2 * calls)  # calls per sample

            def module_loop(csa=csa, x=x, loops=loops):
                for _ in range(loops):
                    csa(x)

            def inline_loop(csa=csa, x=x, loops=loops):
                for _ in range(loops):
                    inline_forward(csa, x)

            jobs = {"module": module_loop, "inline": inline_loop}
            cpu_before, wall_before = _cpu_seconds(), time.perf_counter()
            timed = time_interleaved(jobs, repetitions, warmup, retries=retries)
            seconds = time.perf_counter() - wall_before
            others = _others_share(cpu_before, _cpu_seconds(), seconds)
        us = {n: [s / loops * 1e6 for s in t["seconds"]] for n, t in timed.items()}
        module_us = statistics.median(us["module"])
        inline_us = statistics.median(us["inline"])
        results.append(
            {
                "seq_len": T,
                "calls_per_sample": loops,
                "module_us": round(module_us, 2),
                "inline_us": round(inline_us, 2),
                "ratio": round(module_us / inline_us, 4),
                "module_samples_us": [round(u, 2) for u in us["module"]],
                "inline_samples_us": [round(u, 2) for u in us["inline"]],
                "retaken": sum(t["retaken"] for t in timed.values()),
                "seconds": round(seconds, 2),
                "others_cpu_share": others,
            }
        )
        _progress(
            f"T={T}: module {module_us:.1f} us, inline {inline_us:.1f} us, "
            f"ratio {module_us / inline_us:.3f}"
        )
    return results


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


def _table(header: list[str], groups: list[str], rows: list[list[str]]) -> str:
    """Right-aligned columns; a group names the three variant columns below it."""
    widths = [
        # the variant columns at least 8 wide, so that the groups' titles fit
        max(
            len(h),
            *(len(row[i]) for row in rows),
            8 if 0 < i <= 3 * len(groups) else 5,
        )
        for i, h in enumerate(header)
    ]
    lines = []
    if groups:
        spans = [sum(widths[1 + 3 * g : 4 + 3 * g]) + 4 for g in range(len(groups))]
        titles = [g.center(w) for g, w in zip(groups, spans, strict=True)]
        lines.append("  ".join([" " * widths[0], *titles]))
    lines.append("  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)))
    for row in rows:
        lines.append(
            "  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True))
        )
    return "\n".join(line.rstrip() for line in lines)


def _per_T_table(
    data: dict, n_head: int, groups: list[str], cell, busy=False
) -> str:
    labels = [VARIANT_LABELS[v] for v in VARIANTS]
    rows = []
    for T in data["settings"]["seq_lens"]:
        cells = [lookup(data, v, n_head, T) for v in VARIANTS]
        row = [str(T)] + [cell(c[m]) for m in MODES for c in cells]
        if busy:  # the share of the CPU other processes took while T was measured
            share = cells[0].get("others_cpu_share")
            row.append("?" if share is None else f"{share:.0%}")
        rows.append(row)
    header = ["T", *labels, *labels] + (["others"] if busy else [])
    return _table(header, groups, rows)


def time_table(data: dict, n_head: int) -> str:
    """Median milliseconds per run, forward and forward+backward, a row per T.

    The last column is the share of the CPU that other processes took while
    that row was measured: above a few percent, its times are too high.
    """
    groups = ["forward, ms", "forward+backward, ms"]
    return _per_T_table(
        data, n_head, groups, lambda c: _num(c["median_ms"]), busy=True
    )


def memory_table(data: dict, n_head: int) -> str:
    """Peak MiB of tensors alive during a run, forward and forward+backward."""
    groups = ["forward peak, MiB", "fwd+bwd peak, MiB"]
    return _per_T_table(
        data, n_head, groups, lambda c: _num(c["peak_bytes"] / 2**20)
    )


def heads_table(data: dict, seq_len: int) -> str:
    """forward+backward time and peak memory at one T, a row per head count."""
    labels = [VARIANT_LABELS[v] for v in VARIANTS]
    n_embed = data["settings"]["n_embed"]
    rows = []
    for n_head in data["settings"]["heads"]:
        cells = [
            lookup(data, v, n_head, seq_len)["forward_backward"] for v in VARIANTS
        ]
        rows.append(
            [f"{n_head} ({n_embed // n_head})"]
            + [_num(c["median_ms"]) for c in cells]
            + [_num(c["peak_bytes"] / 2**20) for c in cells]
        )
    groups = ["fwd+bwd, ms", "fwd+bwd peak, MiB"]
    return _table(["H (D)", *labels, *labels], groups, rows)


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
    return _table(header, [], rows)


def describe_settings(data: dict) -> str:
    """One line: sizes, dtype and how the times were taken."""
    s = data["settings"]
    untimed = 2 + s["warmup"]  # the memory run, the page-fault run, warm-up rounds
    return (
        f"B={s['batch']}, C={s['n_embed']}, float32; median of {s['repetitions']}"
        f" timed runs (after {untimed} untimed), jobs taking turns"
    )


def describe_machine(data: dict) -> str:
    """A few lines: processor, torch and threads, and how busy the machine was."""
    m = data["machine"]
    text = (
        f"{m['cpu_model']}, {m['cpu_count']} cores, {m['memory_gib']} GiB,"
        f" {m['date'][:10]}\n{m['platform']}\ntorch {m['torch']} with"
        f" {m['torch_threads']} threads, Python {m['python']}\n"
        f"load average before the run: {m['load_per_core']} per core"
    )
    rows = data.get("results", [])
    if rows and all(r.get("others_cpu_share") is not None for r in rows):
        weighted = sum(r["others_cpu_share"] * r["seconds"] for r in rows)
        mean = weighted / sum(r["seconds"] for r in rows)
        highest = max(r["others_cpu_share"] for r in rows)
        text += (
            f"\nCPU time taken by other processes during the run: {mean:.0%}"
            f" on average, {highest:.0%} at most"
        )
    cells = [r[m] for r in rows for m in MODES if m in r]
    if cells and "retaken" in cells[0]:
        kept = [w for c in cells for w in c["waited"]]
        waited = sum(w > data["settings"]["max_waited"] for w in kept)
        text += (
            f"\nruns retaken as another process held a CPU:"
            f" {sum(c['retaken'] for c in cells)}; kept runs that waited:"
            f" {waited} of {len(kept)}"
        )
    return text


# ------------------------------------------------------------------ plots

COLORS = {"per-head": "#D55E00", "manual": "#CC79A7", "sdpa": "#009E73"}
MARKERS = {"per-head": "circle", "manual": "square", "sdpa": "triangle"}
BUSY = 0.1  # above this share of the CPU taken by others, a time is marked
GREY = "#808080"  # readable on Material's white and on its dark slate background
GUIDES = {"∝ T²": (2, "7 4"), "∝ T": (1, "2 3")}  # exponent, dash pattern
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, Helvetica, Arial, sans-serif"


def _marker(kind: str, x: float, y: float, color: str, filled=True) -> str:
    paint = f'fill="{color}"' if filled else f'fill="none" stroke="{color}"'
    if kind == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" {paint}/>'
    if kind == "square":
        corner = f'x="{x - 3.2:.1f}" y="{y - 3.2:.1f}"'
        return f'<rect {corner} width="6.4" height="6.4" {paint}/>'
    points = (
        f"{x:.1f},{y - 4.2:.1f} {x + 4:.1f},{y + 3:.1f} {x - 4:.1f},{y + 3:.1f}"
    )
    return f'<polygon points="{points}" {paint}/>'


def _line(x1, y1, x2, y2, color=GREY, width=1.0, extra="") -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"'
        f' stroke="{color}" stroke-width="{width}"{extra}/>'
    )


def _text(x, y, text, extra="") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}"{extra}>{escape(text)}</text>'


def svg_loglog(panels: list[dict], *, title: str, y_label: str, desc: str) -> str:
    """Log-log line charts side by side, with one y range, as SVG text.

    Args:
        panels: each {"title": str, "series": [(variant, [(T, y), ...])],
            "guides": [(label, (T, y))], "hollow": {T, ...}}: a guide is a
            dashed line y ∝ T ** exponent through the point, label and
            exponent from GUIDES; the markers at each T in "hollow" (optional)
            are drawn hollow: measured while other processes were busy.
        title: drawn at the top, and the SVG's <title>.
        y_label: the vertical axis. desc: the SVG's <desc>, for screen readers.

    Returns:
        The SVG document. Transparent background, grey axes and text, colours
        that read on a light and on a dark page.
    """
    width, height = 780, 360
    left, right, top, bottom, gap = 62, 14, 74, 46, 24
    panel_w = (width - left - right - gap * (len(panels) - 1)) / len(panels)
    panel_h = height - top - bottom
    xs = sorted({x for p in panels for _, pts in p["series"] for x, _ in pts})
    ys = [y for p in panels for _, pts in p["series"] for _, y in pts if y > 0]
    x_lo, x_hi = math.log2(xs[0]) - 0.25, math.log2(xs[-1]) + 0.25
    y_lo, y_hi = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    y_hi = max(y_hi, y_lo + 2)
    y_ticks = [(10.0**e, True) for e in range(y_lo, y_hi + 1)]
    if y_hi - y_lo <= 3:  # few decades: 2 and 5 in between as well
        y_ticks += [(m * 10.0**e, False) for e in range(y_lo, y_hi) for m in (2, 5)]

    def sx(x):
        return (math.log2(x) - x_lo) / (x_hi - x_lo) * panel_w

    def sy(y):
        return panel_h - (math.log10(y) - y_lo) / (y_hi - y_lo) * panel_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}"'
        f' width="{width}" height="{height}" role="img"'
        f' aria-labelledby="title desc" font-family="{escape(FONT)}"'
        f' font-size="12" fill="{GREY}">',
        f'<title id="title">{escape(title)}</title>',
        f'<desc id="desc">{escape(desc)}</desc>',
        _text(left, 20, title, ' font-size="14" font-weight="600"'),
    ]
    x = left  # the legend: variants, then the guide lines
    for variant in VARIANTS:
        color, label = COLORS[variant], VARIANT_LABELS[variant]
        out.append(_line(x, 40, x + 24, 40, color, 2))
        out.append(_marker(MARKERS[variant], x + 12, 40, color))
        out.append(_text(x + 30, 44, label))
        x += 44 + 7 * len(label)
    for label, (_, dash) in GUIDES.items():
        out.append(
            _line(x, 40, x + 24, 40, width=1.3, extra=f' stroke-dasharray="{dash}"')
        )
        out.append(_text(x + 30, 44, label))
        x += 36 + 7 * len(label)
    if any(panel.get("hollow") for panel in panels):
        out.append(_marker("circle", x + 6, 40, GREY, filled=False))
        busy = f"machine busy: others took > {BUSY:.0%} of the CPU"
        out.append(_text(x + 16, 44, busy))
    for n, panel in enumerate(panels):
        ox = left + n * (panel_w + gap)
        out.append(f'<g transform="translate({ox:.1f},{top})">')
        out.append(
            f'<clipPath id="clip{n}"><rect x="0" y="0" width="{panel_w:.1f}"'
            f' height="{panel_h}"/></clipPath>'
        )
        out.append(_text(0, -10, panel["title"], ' font-weight="600"'))
        for value, major in sorted(y_ticks):
            y = sy(value)
            opacity = 0.35 if major else 0.15
            extra = f' stroke-opacity="{opacity}"'
            out.append(_line(0, y, panel_w, y, extra=extra))
            if n == 0:  # the panels share the y axis: labels on the first
                label = f"{value:,.0f}" if value >= 1 else f"{value:g}"
                out.append(_text(-6, y + 4, label, ' text-anchor="end"'))
        for T in xs:
            out.append(
                _line(sx(T), 0, sx(T), panel_h, extra=' stroke-opacity="0.15"')
            )
            out.append(_text(sx(T), panel_h + 16, str(T), ' text-anchor="middle"'))
        out.append(
            f'<rect x="0" y="0" width="{panel_w:.1f}" height="{panel_h}"'
            f' fill="none" stroke="{GREY}" stroke-width="1"/>'
        )
        out.append(
            _text(
                panel_w / 2,
                panel_h + 36,
                "sequence length T (log scale)",
                ' text-anchor="middle"',
            )
        )
        for label, (gx, gy) in panel["guides"]:
            exponent, dash = GUIDES[label]
            (x1, x2) = (2.0**x_lo, 2.0**x_hi)
            y1, y2 = (gy * (t / gx) ** exponent for t in (x1, x2))
            extra = f' stroke-dasharray="{dash}"'
            out.append(f'<g clip-path="url(#clip{n})">')
            out.append(
                _line(sx(x1), sy(y1), sx(x2), sy(y2), width=1.3, extra=extra)
            )
            out.append("</g>")
        hollow = panel.get("hollow", set())
        for variant, pts in panel["series"]:
            color = COLORS[variant]
            pts = [(sx(t), sy(v), t not in hollow) for t, v in pts if v > 0]
            path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in pts)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{color}"'
                f' stroke-width="2" stroke-linejoin="round"/>'
            )
            marker = MARKERS[variant]
            out.extend(_marker(marker, x, y, color, f) for x, y, f in pts)
        out.append("</g>")
    out.append(
        f'<text transform="translate(16,{top + panel_h / 2:.1f}) rotate(-90)"'
        f' text-anchor="middle">{escape(y_label)}</text>'
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plots(data: dict) -> dict[str, str]:
    """The two SVG files of a result, time and peak memory against T.

    Returns:
        file name -> SVG text, drawn for the head count settings["plot_heads"].
    """
    n_head = data["settings"]["plot_heads"]
    seq_lens = data["settings"]["seq_lens"]
    setting = f"H={n_head}, " + describe_settings(data).split(";")[0]
    busy_T = set()  # times measured while other processes were busy: drawn hollow
    for T in seq_lens:
        share = lookup(data, "sdpa", n_head, T).get("others_cpu_share")
        if share is not None and share > BUSY:
            busy_T.add(T)
    files = {}
    for name, key, scale, y_label, what in (
        ("time", "median_ms", 1.0, "milliseconds per run (log scale)", "Time"),
        (
            "memory",
            "peak_bytes",
            2.0**-20,
            "peak MiB of tensors (log scale)",
            "Peak memory",
        ),
    ):
        panels = []
        for mode in MODES:
            series = {
                v: [
                    (T, lookup(data, v, n_head, T)[mode][key] * scale)
                    for T in seq_lens
                ]
                for v in VARIANTS
            }
            panels.append(
                {
                    "title": MODE_LABELS[mode],
                    "series": list(series.items()),
                    # Through the largest T of the manual and the fused variant.
                    "guides": [
                        ("∝ T²", series["manual"][-1]),
                        ("∝ T", series["sdpa"][-1]),
                    ],
                    "hollow": busy_T if name == "time" else set(),
                }
            )
        desc = (
            f"{what} of causal self-attention against the sequence length T,"
            f" from {seq_lens[0]} to {seq_lens[-1]}, log-log, {setting}: per-head,"
            f" manual and SDPA implementations, forward and forward+backward,"
            f" with guide lines proportional to T squared and to T. The numbers"
            f" are in docs/assets/results/attention-cost.json."
        )
        files[f"attention-cost-{name}.svg"] = svg_loglog(
            panels,
            title=f"{what} vs sequence length ({setting})",
            y_label=y_label,
            desc=desc,
        )
    return files


# ------------------------------------------------------------------ command line


def _json(data: dict) -> str:
    """Indented JSON, with each list of numbers on one line."""
    text = json.dumps(data, indent=1, ensure_ascii=False)
    numbers = re.compile(r"\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]")
    return (
        numbers.sub(lambda m: "[" + ", ".join(re.split(r",\s*", m[1])) + "]", text)
        + "\n"
    )


def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    _progress(f"wrote {path}")


def _output_dir(args) -> Path:
    out = Path(args.out) if args.out else QUICK_DIR if args.quick else RESULTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return out


def cmd_attention(args, argv: list[str]) -> None:
    """`attention`: measure, write the JSON and the plots, print the tables."""
    quick = args.quick
    seq_lens = sorted(
        set(args.seq_lens or ([64, 128, 256] if quick else DEFAULT_T))
    )
    heads = sorted(set(args.heads or ([2] if quick else [2, 4, 8])))
    n_embed = args.n_embed or (64 if quick else 256)
    repetitions = args.repetitions or (2 if quick else 5)
    warmup = 0 if args.warmup is None else args.warmup
    plot_heads = args.plot_heads or max(heads)
    if any(n_embed % n_head for n_head in heads):
        raise SystemExit(
            f"--n-embed ({n_embed}) must be divisible by every --heads value"
        )
    if plot_heads not in heads:
        raise SystemExit(
            f"--plot-heads ({plot_heads}) must be one of --heads {heads}"
        )
    out = _output_dir(args)
    machine = machine_info()  # the load average before the run
    started = time.perf_counter()
    retries = args.retries if args.retries is not None else 0 if quick else 3
    results = run_attention(
        seq_lens, heads, args.batch, n_embed, repetitions, warmup, retries
    )
    data = {
        "schema": SCHEMA,
        "command": " ".join(["python -m snippets.bench", *argv]),
        "machine": machine,
        "settings": {
            "batch": args.batch,
            "n_embed": n_embed,
            "dtype": "float32",
            "seq_lens": seq_lens,
            "heads": heads,
            "repetitions": repetitions,
            "warmup": warmup,
            "retries": retries,
            "max_waited": MAX_WAITED,
            "plot_heads": plot_heads,
            "memory": "torch.profiler(profile_memory=True): most bytes of tensors"
            " alive at once during one run, above those alive before it",
            "timing": "time.perf_counter around each run; the six jobs (3 variants"
            " x 2 modes) take turns in rotating order; median over repetitions;"
            " every job has run twice (memory, page faults) before the first",
            "page_faults": "minor page faults (ru_minflt) in one unprofiled run",
        },
        "variants": {
            "per-head": "MultiHeadAttention(x): H Head modules, (B, T, T) per head",
            "manual": "CausalSelfAttention(x, return_weights=True): batched,"
            " explicit softmax, (B, H, T, T) scores and weights",
            "sdpa": "CausalSelfAttention(x): F.scaled_dot_product_attention,"
            " is_causal=True",
        },
        "elapsed_seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    _write(out / "attention-cost.json", _json(data))
    for name, text in plots(data).items():
        _write(out / name, text)
    print(f"{describe_machine(data)}\n{describe_settings(data)}\n")
    for n_head in heads:
        D = n_embed // n_head
        print(f"H={n_head} (D={D}), time\n{time_table(data, n_head)}\n")
        print(f"H={n_head} (D={D}), memory\n{memory_table(data, n_head)}\n")
    print(f"T={seq_lens[-1]}, by head count\n{heads_table(data, seq_lens[-1])}")
    _progress(f"done in {data['elapsed_seconds']:.0f} s")
    _warn_if_busy(results)


def _warn_if_busy(results: list[dict]) -> None:
    shares = [r["others_cpu_share"] for r in results if r.get("others_cpu_share")]
    if shares and max(shares) > 0.1:
        _progress(
            f"warning: other processes took up to {max(shares):.0%} of the CPU"
            " during the run: times are unreliable (memory, page faults are not)"
        )


def cmd_overhead(args, argv: list[str]) -> None:
    """`overhead`: time the module against inline_forward, write the JSON."""
    quick = args.quick
    seq_lens = sorted(set(args.seq_lens or ([64] if quick else [64, 256, 1024])))
    repetitions = args.repetitions or (3 if quick else 21)
    sample_s = args.sample_seconds or (0.01 if quick else 0.05)
    warmup = 1 if args.warmup is None else args.warmup
    retries = args.retries if args.retries is not None else 0 if quick else 3
    out = _output_dir(args)
    machine = machine_info()
    results = run_overhead(
        seq_lens,
        args.n_head,
        args.batch,
        args.n_embed,
        repetitions,
        warmup,
        sample_s,
        retries,
    )
    data = {
        "schema": OVERHEAD_SCHEMA,
        "command": " ".join(["python -m snippets.bench", *argv]),
        "machine": machine,
        "settings": {
            "batch": args.batch,
            "n_embed": args.n_embed,
            "n_head": args.n_head,
            "dtype": "float32",
            "seq_lens": seq_lens,
            "repetitions": repetitions,
            "warmup": warmup,
            "retries": retries,
            "max_waited": MAX_WAITED,
            "sample_seconds": sample_s,
            "mode": "forward under torch.no_grad()",
        },
        "results": results,
    }
    _write(out / "attention-overhead.json", _json(data))
    print(describe_machine(data))
    print(
        f"CausalSelfAttention.forward vs inline_forward, B={args.batch},"
        f" C={args.n_embed}, H={args.n_head}, no_grad, median of {repetitions}"
        f" samples\n{overhead_table(data)}"
    )


DEFAULT_T = [64, 128, 256, 512, 1024, 2048, 4096]


def _ints(text: str) -> list[int]:
    """'64 128,256' -> [64, 128, 256]: positive integers, spaces or commas."""
    try:
        values = [int(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected integers, got {text!r}"
        ) from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected positive integers, got {text!r}"
        )
    return values


def parser() -> argparse.ArgumentParser:
    """The command line: `attention` and `overhead`, with their options."""
    top = argparse.ArgumentParser(
        prog="python -m snippets.bench",
        description="Measure what causal self-attention costs on this CPU.",
    )
    sub = top.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    add = common.add_argument
    add(
        "-T",
        "--seq-lens",
        type=_ints,
        metavar="'T ...'",
        help="sequence lengths (default: attention 64 128 ... 4096,"
        " overhead 64 256 1024)",
    )
    add("--batch", type=int, default=1, help="batch size B (default 1)")
    add(
        "--repetitions",
        type=int,
        help="rounds kept for the median (default: attention 5, overhead 21)",
    )
    add(
        "--warmup",
        type=int,
        help="extra rounds run first and not kept (default: attention 0, after"
        " its memory and page-fault runs; overhead 1)",
    )
    add(
        "--out",
        metavar="DIR",
        help="folder for the result files (default docs/assets/results;"
        " with --quick, test-artifacts/bench-quick)",
    )
    add(
        "--retries",
        type=int,
        help="times a run may be taken again when another process held a CPU"
        " during it (default 3; 0 with --quick)",
    )
    add("--quick", action="store_true", help="small sizes, few rounds: seconds")

    attention = sub.add_parser(
        "attention",
        parents=[common],
        help="time and peak memory of three implementations over T",
        description="Time (forward, forward+backward) and peak tensor memory of"
        " the per-head, manual and SDPA implementations of causal self-attention."
        " Defaults: T 64 to 4096, heads 2 4 8, C 256, B 1, 5 repetitions.",
    )
    attention.add_argument(
        "--heads",
        type=_ints,
        metavar="'H ...'",
        help="head counts (default '2 4 8')",
    )
    attention.add_argument("--n-embed", type=int, help="channels C (default 256)")
    attention.add_argument(
        "--plot-heads",
        type=int,
        help="the head count plotted (default: the largest)",
    )

    overhead = sub.add_parser(
        "overhead",
        parents=[common],
        help="CausalSelfAttention.forward against the same ops inline",
        description="Time CausalSelfAttention.forward against inline_forward, the"
        " same ops on the same tensors (forward under no_grad, interleaved"
        " samples, medians). Defaults: T 64 256 1024, H 8, C 256, 21 samples.",
    )
    overhead.add_argument(
        "--n-head", type=int, default=8, help="heads H (default 8)"
    )
    overhead.add_argument(
        "--n-embed", type=int, default=256, help="C (default 256)"
    )
    overhead.add_argument(
        "--sample-seconds", type=float, help="length of one sample (default 0.05)"
    )
    return top


def main(argv: list[str] | None = None) -> None:
    """Run the command line; argv defaults to sys.argv[1:]."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser().parse_args(argv)
    if args.command == "attention":
        cmd_attention(args, argv)
    else:
        cmd_overhead(args, argv)


if __name__ == "__main__":
    main()
