"""What attention costs, measured: the runners of the attention-cost page.

run_attention times and profiles every implementation of snippets/pages/attention_cost.py
over T and head counts; run_overhead times CausalSelfAttention.forward against the
same ops inline. `python -m lab.attention_cost` runs them; lab/parts/attention_cost_tables.py
reads their results. Shape letters: B batch, T sequence length, C channels, H heads,
D head size.
"""

import functools
import os
import resource
import statistics
import time
from pathlib import Path

import torch

from lab.shared.experiment import progress, randn
from snippets.core.attention import CausalSelfAttention
from snippets.pages.attention_cost import (
    FORWARD_ONLY,
    VARIANT_LABELS,
    VARIANTS,
    forward,
    forward_backward,
    inline_forward,
    make_variants,
    score_bytes,
)
from snippets.pages.measure import page_faults, peak_memory, time_interleaved

MODES = ("forward", "forward_backward")
MODE_LABELS = {"forward": "forward", "forward_backward": "forward+backward"}


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


def _ms(seconds: list[float]) -> list[float]:
    return [round(s * 1e3, 4) for s in seconds]


def _first_calls(calls: dict, x: torch.Tensor) -> tuple[dict, dict]:
    """One untimed-for-the-table forward of every variant: its wall-clock
    seconds (FlexAttention's first call in the process compiles it), and its
    largest difference from SDPA's output."""
    seconds, outputs = {}, {}
    with torch.no_grad():
        for v in VARIANTS:
            start = time.perf_counter()
            outputs[v] = calls[v](x)
            seconds[v] = round(time.perf_counter() - start, 5)
    diffs = {v: (outputs[v] - outputs["sdpa"]).abs().max().item() for v in VARIANTS}
    return seconds, diffs


def run_attention(seq_lens, heads, batch, n_embed, repetitions, warmup, retries, clock="wall"):
    """Peak memory and interleaved timings of every variant and mode.

    For each head count and T: a first forward of every variant (FlexAttention
    compiles during its first one; every output is compared with SDPA's); then
    for every variant and mode (eleven jobs: FlexAttention has no backward on
    the CPU) one profiled run for the memory, one run counting page faults,
    then the timed rounds, the jobs taking turns.

    Returns:
        One dict per variant, head count and T (see attention-cost.json).
        clock "wall" keeps time.perf_counter's seconds in samples_ms, "cpu"
        the process's CPU seconds (time.process_time: all threads, without
        the time spent waiting while other processes held the cores).
    """
    configs = [(n_head, T) for n_head in heads for T in seq_lens]
    results = []
    started = time.perf_counter()
    for i, (n_head, T) in enumerate(configs, 1):
        calls, modules = make_variants(n_head, n_embed, T)
        x = randn(batch, T, n_embed, seed=1)
        grad_out = randn(batch, T, n_embed, seed=2)
        first_call, diffs = _first_calls(calls, x)
        jobs = {}
        for v in VARIANTS:
            jobs[v, "forward"] = functools.partial(forward, calls[v], x)
            if v not in FORWARD_ONLY:
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
                # The first forward of this variant at this size, outside the
                # timed runs: for FlexAttention at the first size, the compile.
                "first_call_seconds": first_call[v],
                "max_abs_diff_vs_sdpa": diffs[v],
            }
            for mode in MODES:
                if (v, mode) not in jobs:  # FlexAttention's backward: none on the CPU
                    row[mode] = None
                    continue
                ms = _ms(timed[v, mode]["seconds" if clock == "wall" else "cpu_seconds"])
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
            cell = r["forward"]
            summary.append(f"{VARIANT_LABELS[r['variant']]} {cell['median_ms']:.1f}")
        elapsed = time.perf_counter() - started
        progress(
            f"[{i}/{len(configs)}] H={n_head} T={T} forward, ms: "
            f"{'  '.join(summary)}"
            f" ({elapsed:.0f} s)"
        )
    return results


def run_overhead(seq_lens, n_head, batch, n_embed, repetitions, warmup, sample_s, retries):
    """Median time of CausalSelfAttention.forward and inline_forward, no_grad.

    Each sample times a loop of calls lasting about sample_s seconds, so that
    neither the clock's resolution nor the loop matters; module and inline take
    turns, sample by sample.
    """
    results = []
    for T in seq_lens:
        torch.manual_seed(0)
        csa = CausalSelfAttention(n_head, n_embed, context_length=T)
        x = randn(batch, T, n_embed, seed=1)
        with torch.no_grad():
            # The same ops on the same tensors: the same numbers, bit for bit.
            torch.testing.assert_close(csa(x), inline_forward(csa, x), rtol=0, atol=0)
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
        progress(
            f"T={T}: module {module_us:.1f} us, inline {inline_us:.1f} us, "
            f"ratio {module_us / inline_us:.3f}"
        )
    return results
