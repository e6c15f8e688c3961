"""What attention costs, measured: the command, its runners, tables and plots.

    python -m lab.bench attention          # the page's numbers, a few minutes
    python -m lab.bench attention --quick  # small sizes, seconds (the tests)
    python -m lab.bench overhead           # CausalSelfAttention vs inline ops

`attention` prints tables and writes a JSON result file and two SVG plots;
`overhead` prints a table and writes a JSON result file. The implementations are
in snippets/attention_cost.py, the instruments in snippets/measure.py. Shape
letters: B batch, T sequence length, C channels, H heads, D head size.
"""

import argparse
import functools
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

from lab.common import (
    ARTIFACTS,
    RESULTS_DIR,
    command_line,
    json_text,
    note_load_after,
    progress,
    result_header,
    write_text,
)
from snippets.attention import CausalSelfAttention
from snippets.attention_cost import (
    FORWARD_ONLY,
    VARIANT_LABELS,
    VARIANTS,
    forward,
    forward_backward,
    inline_forward,
    make_variants,
    score_bytes,
)
from snippets.measure import MAX_WAITED, page_faults, peak_memory, time_interleaved

QUICK_DIR = ARTIFACTS / "bench-quick"  # --quick, ignored by git
SCHEMA = "attention-guide/attention-cost/1"
OVERHEAD_SCHEMA = "attention-guide/attention-overhead/1"
MODES = ("forward", "forward_backward")
MODE_LABELS = {"forward": "forward", "forward_backward": "forward+backward"}


def plots(data: dict) -> dict[str, str]:
    """The two SVG files of a result, time and peak memory against T.

    Returns:
        file name -> SVG text, drawn for the head count settings["plot_heads"].
    """
    from lab.plotting import attention_cost, svg_text

    return {
        f"attention-cost-{what}.svg": svg_text(attention_cost(data, what))
        for what in ("time", "memory")
    }


# ------------------------------------------------------------------ measuring


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
        x = _randn(batch, T, n_embed, seed=1)
        grad_out = _randn(batch, T, n_embed, seed=2)
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
        x = _randn(batch, T, n_embed, seed=1)
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


def describe_machine(data: dict) -> str:
    """A few lines: processor, torch and threads, and how busy the machine was."""
    m = data["machine"]
    text = (
        f"{m['cpu_model']}, {m['cpu_count']} cores, {m['memory_gib']} GiB,"
        f" {m['date'][:10]}\n{m['platform']}\ntorch {m['torch']} with"
        f" {m['torch_threads']} threads, Python {m['python']}\n"
        f"load average before the run: {m['load_per_core']} per core"
    )
    if "load_1min_after" in m:
        text += f", after: {m['load_1min_after'] / m['cpu_count']:.2g} per core"
    if data.get("note"):
        text += f"\nnote: {data['note']}"
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


# ------------------------------------------------------------------ command line


def _write(path: Path, text: str) -> None:
    write_text(path, text)
    progress(f"wrote {path}")


def _output_dir(args) -> Path:
    out = Path(args.out) if args.out else QUICK_DIR if args.quick else RESULTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    return out


def cmd_attention(args, argv: list[str]) -> None:
    """`attention`: measure, write the JSON and the plots, print the tables."""
    quick = args.quick
    seq_lens = sorted(set(args.seq_lens or ([64, 128, 256] if quick else DEFAULT_T)))
    heads = sorted(set(args.heads or ([2] if quick else [2, 4, 8])))
    n_embed = args.n_embed or (64 if quick else 256)
    repetitions = args.repetitions or (2 if quick else 5)
    warmup = 0 if args.warmup is None else args.warmup
    plot_heads = args.plot_heads or max(heads)
    if any(n_embed % n_head for n_head in heads):
        raise SystemExit(f"--n-embed ({n_embed}) must be divisible by every --heads value")
    if plot_heads not in heads:
        raise SystemExit(f"--plot-heads ({plot_heads}) must be one of --heads {heads}")
    if args.threads:
        torch.set_num_threads(args.threads)  # before the header records it
    out = _output_dir(args)
    # The machine, with the load average before the run.
    header = result_header(SCHEMA, command_line("lab.bench", argv))
    started = time.perf_counter()
    retries = args.retries if args.retries is not None else 0 if quick else 3
    results = run_attention(
        seq_lens, heads, args.batch, n_embed, repetitions, warmup, retries, args.clock
    )
    note_load_after(header)  # the load average after the run, beside the one before
    if args.note:
        header["note"] = args.note
    data = {
        **header,
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
            "clock": args.clock,
            "memory": "torch.profiler(profile_memory=True): most bytes of tensors"
            " alive at once during one run, above those alive before it",
            "timing": "time.perf_counter around each run; the eleven jobs (6 variants"
            " x 2 modes, FlexAttention forward only) take turns in rotating order;"
            " median over repetitions; every job has run twice (memory, page"
            " faults) before the first, after one first forward of each variant",
            "flex": "torch.compile(flex_attention, dynamic=True), compiled once per"
            " process; its first call at each T (first_call_seconds) is not in the"
            " timed runs; no backward on the CPU in this torch",
            "page_faults": "minor page faults (ru_minflt) in one unprofiled run",
        },
        "variants": {
            "per-head": "MultiHeadAttention(x): H Head modules, (B, T, T) per head",
            "manual": "CausalSelfAttention(x, return_weights=True): batched,"
            " explicit softmax, (B, H, T, T) scores and weights",
            "einsum": "einsum_attention(csa, x): the manual path's arithmetic as"
            " torch.einsum calls, (B, H, T, T) scores and weights",
            "torch-mha": "torch.nn.MultiheadAttention with csa's weights,"
            " attn_mask + is_causal=True, need_weights=False",
            "flex": "FlexAttention, causal block mask (128 x 128 tiles), compiled",
            "sdpa": "CausalSelfAttention(x): F.scaled_dot_product_attention, is_causal=True",
        },
        "elapsed_seconds": round(time.perf_counter() - started, 1),
        "results": results,
    }
    _write(out / "attention-cost.json", json_text(data))
    for name, text in plots(data).items():
        _write(out / name, text)
    print(f"{describe_machine(data)}\n{describe_settings(data)}\n")
    flex = compile_table(data, heads[0])
    print(f"FlexAttention's first call (compiles) per T, H={heads[0]}\n{flex}\n")
    for n_head in heads:
        D = n_embed // n_head
        print(f"H={n_head} (D={D}), time\n{time_table(data, n_head)}\n")
        print(f"H={n_head} (D={D}), memory\n{memory_table(data, n_head)}\n")
    print(f"T={seq_lens[-1]}, by head count\n{heads_table(data, seq_lens[-1])}")
    progress(f"done in {data['elapsed_seconds']:.0f} s")
    _warn_if_busy(results)


def _warn_if_busy(results: list[dict]) -> None:
    shares = [r["others_cpu_share"] for r in results if r.get("others_cpu_share")]
    if shares and max(shares) > 0.1:
        progress(
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
    header = result_header(OVERHEAD_SCHEMA, command_line("lab.bench", argv))
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
        **header,
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
    _write(out / "attention-overhead.json", json_text(data))
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
        raise argparse.ArgumentTypeError(f"expected integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def parser() -> argparse.ArgumentParser:
    """The command line: `attention` and `overhead`, with their options."""
    top = argparse.ArgumentParser(
        prog="python -m lab.bench",
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
        help="sequence lengths (default: attention 64 128 ... 4096, overhead 64 256 1024)",
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
        "--threads", type=int, help="torch threads (default: torch's own choice)"
    )
    attention.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="wall: time.perf_counter (default); cpu: this process's CPU time,"
        " which does not count waiting for a core other processes hold",
    )
    attention.add_argument(
        "--note",
        help="a sentence kept in the result file, e.g. how busy the machine was",
    )
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
    overhead.add_argument("--n-head", type=int, default=8, help="heads H (default 8)")
    overhead.add_argument("--n-embed", type=int, default=256, help="C (default 256)")
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
