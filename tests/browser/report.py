"""The per-page table the browser tests print at the end of the run."""

from tests.browser import visit as bv


def report_lines(reports: list[dict]) -> list[str]:
    w = max([22, *(len(r["page"]) for r in reports)])
    lines = [
        f"{'page':<{w}} {'formulas':>8} {'diagrams':>8} {'first screen ms':>15} "
        f"{'kB before scroll':>16} {'kB in all':>9} {'CLS':>6} {'diagram wait ms':>15} checks"
    ]
    for r in reports:
        ms = "never" if r["ms_first_screen"] is None else str(r["ms_first_screen"])
        waits = ",".join("never" if w is None else str(w) for w in r["diagram_waits_ms"]) or "-"
        lines.append(
            f"{r['page']:<{w}} {r['formulas']:>8} {r['diagrams']:>8} {ms:>15} "
            f"{r['bytes_before_scroll'] / 1000:>16.0f} {r['first_visit_bytes'] / 1000:>9.0f} "
            f"{r['cls']:>6.3f} {waits:>15} {'every' if r.get('every_check', True) else 'cheap'}"
        )
    lines.append(
        "Each page opened as a first visit (empty HTTP cache), desktop, light scheme. first "
        "screen: navigation start to text, math, fonts, images and diagrams of the first "
        "screen done; kB: files fetched before any scroll / after scrolling through; CLS: "
        "cumulative layout shift, scroll-through included; diagram wait: scrolling one screen "
        f"per {bv.STEP_MS} ms (past the last diagram: {bv.NO_DIAGRAM_STEP_MS} ms), how long each "
        "diagram was still being drawn once on screen; checks: every check, or the cheap "
        "ones (tests/browser/tiers.py: API pages but three)."
    )
    attention = next((r for r in reports if r["page"] == "/attention/"), None)
    timed = [r for r in reports if r["ms_first_screen"] is not None]
    if attention and timed:
        slowest = max(timed, key=lambda r: r["ms_first_screen"])
        lines.append(
            f"goals: /attention/ first screen {attention['ms_first_screen']} ms (<= 500), "
            f"{attention['bytes_before_scroll'] / 1000:.0f} kB before scrolling (<= 1000); "
            f"slowest page {slowest['page']} {slowest['ms_first_screen']} ms (<= 500); "
            f"largest CLS {max(r['cls'] for r in reports):.3f} (<= 0.01)"
        )
    return lines
