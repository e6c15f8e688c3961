"""The attention-cost page's results, as the build renders them (hooks/results.py).

Each function reads the committed result files of `python -m lab.attention_cost`
(attention-cost.json, attention-overhead.json, attention-cost-control/) and returns the
Markdown of one result on docs/attention-cost.md, built on the text tables of
lab/parts/attention_cost_tables.py; page_values() holds the numbers of the page's prose.
"""

from __future__ import annotations

from lab.parts.attention_cost_runs import FORWARD_ONLY, MODE_LABELS, MODES
from lab.parts.attention_cost_tables import (
    compile_table,
    describe_run,
    describe_settings,
    lookup,
    memory_table,
    overhead_table,
    time_table,
)
from lab.shared.experiment import describe_machine
from lab.shared.result_pages import from_text, load, markdown_table, measured_note, value_table
from snippets.pages.attention_cost import VARIANT_LABELS, VARIANTS

EARLIER_NAME = "`lab.bench` is the earlier name of `lab.attention_cost`"


def _run() -> tuple[dict, int]:
    data = load("attention-cost.json")
    return data, data["settings"]["plot_heads"]


def _busy_lines(data: dict) -> list[str]:
    """describe_run's lines about the other processes, without the machine's."""
    lines = describe_run(data).splitlines()
    return lines[len(describe_machine(data).splitlines()) :]


def run_note() -> str:
    """How the main run was measured: command, machine, load, settings, time."""
    data, H = _run()
    return measured_note(
        data,
        [
            f"H={H}, D={data['settings']['n_embed'] // H}; " + describe_settings(data),
            "CPU time of this process on one thread: other processes kept both cores busy",
            *_busy_lines(data),
            EARLIER_NAME,
        ],
        seconds=data["elapsed_seconds"],
        notes=False,
    )


def time_result() -> str:
    data, H = _run()
    return from_text(time_table(data, H))


def memory_result() -> str:
    data, H = _run()
    return from_text(memory_table(data, H))


def _growth(data, variant, mode, key, T, H) -> float:
    """How much a measurement grows from T // 2 to T."""
    now = lookup(data, variant, H, T)[mode][key]
    return now / lookup(data, variant, H, T // 2)[mode][key]


def growth_result() -> str:
    """Each measurement's growth per doubling of T, one table per mode."""
    data, H = _run()
    doublings = data["settings"]["seq_lens"][1:]
    tables = []
    for mode in MODES:
        rows = []
        for what, key in (("peak memory", "peak_bytes"), ("time", "median_ms")):
            for v in VARIANTS:
                if mode == "forward_backward" and v in FORWARD_ONLY:
                    continue
                steps = [_growth(data, v, mode, key, T, H) for T in doublings]
                rows.append([f"{what}, {VARIANT_LABELS[v]}", *(f"x{g:.1f}" for g in steps)])
        title = f"{MODE_LABELS[mode]}, H={H}: growth from T // 2 to T"
        tables.append(markdown_table(["T", *map(str, doublings)], rows, title))
    return "\n\n".join(tables)


def peak_result() -> str:
    """The forward+backward peak at the largest T in units of one (B, H, T, T) tensor."""
    data, H = _run()
    T = max(data["settings"]["seq_lens"])
    rows = []
    for v in VARIANTS:
        if v in FORWARD_ONLY:
            continue
        row = lookup(data, v, H, T)
        peak, score = row["forward_backward"]["peak_bytes"], row["score_bytes"]
        rows.append([VARIANT_LABELS[v], f"{peak / 2**20:,.0f}", f"{peak / score:.2f}"])
    header = ["", "peak, MiB", f"in units of {score / 2**20:.0f} MiB"]
    return markdown_table(header, rows, f"T={T}, H={H}: forward+backward peak")


def speed_result() -> str:
    """Each variant's time over SDPA's at T = 1024 and the largest T."""
    data, H = _run()
    rows = []
    for T in (1024, max(data["settings"]["seq_lens"])):
        for mode in MODES:
            sdpa = lookup(data, "sdpa", H, T)[mode]["median_ms"]
            cells = []
            for v in VARIANTS:
                cell = lookup(data, v, H, T)[mode]
                cells.append("n/a" if cell is None else f"{cell['median_ms'] / sdpa:.2f}")
            rows.append([f"T={T}, {MODE_LABELS[mode]}", *cells])
    header = ["time / SDPA time", *(VARIANT_LABELS[v] for v in VARIANTS)]
    return markdown_table(header, rows)


def fresh_pages_result() -> str:
    """MiB of fresh pages (minor page faults) per run, from T = 512 on."""
    data, H = _run()
    page = data["machine"]["page_size"]
    tables = []
    for mode in MODES:
        shown = [v for v in VARIANTS if lookup(data, v, H, 64)[mode] is not None]
        rows = []
        for T in data["settings"]["seq_lens"][3:]:
            cells = [lookup(data, v, H, T)[mode] for v in shown]
            rows.append([str(T), *(f"{c['page_faults'] * page / 2**20:,.0f}" for c in cells)])
        title = f"H={H}, {MODE_LABELS[mode]}: fresh pages, MiB per run"
        tables.append(markdown_table(["T", *(VARIANT_LABELS[v] for v in shown)], rows, title))
    return "\n\n".join(tables)


def compile_result() -> str:
    data, H = _run()
    return from_text(compile_table(data, H))


def overhead_result() -> str:
    """The module against the same operations inline, and how it was measured."""
    data = load("attention-overhead.json")
    s = data["settings"]
    table = from_text(overhead_table(data))
    note = measured_note(
        data,
        [
            f"B={s['batch']}, C={s['n_embed']}, H={s['n_head']}, {s['mode']}, median of"
            f" {s['repetitions']} samples of about {s['sample_seconds'] * 1000:.0f} ms each",
            *_busy_lines(data),
            EARLIER_NAME,
        ],
    )
    return f"{table}\n\n{note}"


def _control() -> dict[str, dict]:
    return {name: load(f"attention-cost-control/{name}.json") for name in ("default", "kept")}


def control_result() -> str:
    """The allocator control: time growth and fresh memory, glibc's defaults against
    memory kept."""
    control, mode = _control(), "forward_backward"
    rows = []
    for v in ("manual", "einsum", "sdpa"):
        cells = [VARIANT_LABELS[v]]
        for run in control.values():
            page = run["machine"]["page_size"]
            small, large = (lookup(run, v, 8, T)[mode] for T in (512, 1024))
            cells += [
                f"x{large['median_ms'] / small['median_ms']:.1f}",
                f"{large['page_faults'] * page / 2**20:,.0f}",
            ]
        rows.append(cells)
    header = ["", "default: growth", "default: fresh MiB", "kept: growth", "kept: fresh MiB"]
    title = f"{MODE_LABELS[mode]}, T = 512 -> 1024: time growth, fresh MiB per run at 1024"
    table = markdown_table(header, rows, title)
    runs = list(control.values())
    note = measured_note(runs, [EARLIER_NAME], seconds=sum(r["elapsed_seconds"] for r in runs))
    return f"{table}\n\n{note}"


def page_values() -> dict[str, str]:
    """The numbers of docs/attention-cost.md's prose, from the result files."""
    data, H = _run()
    T = max(data["settings"]["seq_lens"])
    fwd = {v: lookup(data, v, H, T)["forward"]["peak_bytes"] / 2**20 for v in VARIANTS}
    worst = max(r["max_abs_diff_vs_sdpa"] for r in data["results"])
    overhead = load("attention-overhead.json")["results"]
    extra = [r["module_us"] - r["inline_us"] for r in overhead]
    return value_table(
        {
            "elapsed": f"{data['elapsed_seconds']:.0f}",
            "einsum_forward_peak": f"{fwd['einsum']:,.0f}",
            "manual_forward_peak": f"{fwd['manual']:,.0f}",
            "largest_diff": f"{worst:.1g}",
            "overhead_low": f"{min(extra):.0f}",
            "overhead_high": f"{max(extra):.0f}",
            "overhead_ratio_64": f"{overhead[0]['ratio']:.3f}",
        }
    )


def small_T_values() -> dict[str, str]:
    """Forward+backward at T = 64 of per-head, manual and SDPA (the optimization page)."""
    data, H = _run()
    ms = {
        v: lookup(data, v, H, 64)["forward_backward"]["median_ms"]
        for v in ("per-head", "manual", "sdpa")
    }
    return value_table(
        {
            "per_head": f"{ms['per-head']:.2f}",
            "manual": f"{ms['manual']:.2f}",
            "sdpa": f"{ms['sdpa']:.2f}",
            "batching": f"{ms['per-head'] / ms['manual']:.2f}",
            "kernel": f"{ms['manual'] / ms['sdpa']:.2f}",
        }
    )
