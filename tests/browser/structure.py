"""A built page's structure, checked in the browser: its headings, its diagrams'
reserved boxes and its API tables' columns (re-exported by tests/browser/checks.py,
where the other checks are)."""

from tests.browser import js

__all__ = ["check_headings", "check_diagram_boxes", "check_table_columns"]


def check_headings(page) -> list[str]:
    """The article's headings hold together: exactly one h1, no level skipped on the way
    down (h2 then h4), every other heading with a non-empty text and an id of its own (the
    #anchor the table of contents and links point at)."""
    s = page.evaluate(js("headings"))
    problems = []
    if len(s["h1"]) != 1:
        problems.append(f"{len(s['h1'])} h1 headings in the article, not 1: {s['h1'][:3]}")
    problems += [
        f"heading {k['text']!r} is an h{k['to']} right under an h{k['from']}: a level skipped"
        for k in s["skips"]
    ]
    problems += [f"heading {t!r} has no id: nothing can link to it" for t in s["noId"]]
    if s["empty"]:
        problems.append(f"{s['empty']} heading(s) without text")
    problems += [f"two headings share the id {i!r}" for i in s["duplicateIds"]]
    return problems


def check_diagram_boxes(page) -> list[str]:
    """Every drawn diagram sits in a box kept for it before it was drawn (hooks/diagram_boxes.py),
    exactly as tall as the drawing, so that nothing moved when it appeared."""
    problems = []
    for n, d in enumerate(page.evaluate(js("diagram-boxes")), 1):
        if not d["boxed"]:
            problems.append(
                f"diagram {n} has no box kept for it: run "
                "`.venv/bin/python -m tests.browser.diagram_sizes` and commit the sizes"
            )
        elif d["drawnHeight"] is not None and abs(d["boxHeight"] - d["drawnHeight"]) > 2:
            problems.append(
                f"diagram {n}: its box is {d['boxHeight']:.0f} px tall, the drawing "
                f"{d['drawnHeight']:.0f} px: run `.venv/bin/python -m tests.browser.diagram_sizes`"
            )
    return problems


def check_table_columns(page) -> list[str]:
    """Every API table (mkdocstrings' Parameters, Returns, ...) and every table that starts on
    the first screen has its columns fixed by its header: they sit where they sit with all its
    rows, with only its first one, and before Material's script wraps the table. Otherwise the
    columns re-lay as a slow page arrives, and everything in the table moves: a layout shift
    that a load sent at once shows only when the browser happens to paint mid-table (the
    reference index's 0.131 in one run of three on a busy machine, issue 48), but that this
    check finds on every load (extra.css fixes such tables' widths at desktop width)."""
    return [
        f"{'API table' if t['api'] else 'first-screen table'} {' | '.join(t['header'])} "
        f"under #{t['where']}: its columns start at "
        f"{t['all']} px with its {t['rows']} rows, {t['first']} with only the first, "
        f"{t['unwrapped']} before Material wraps it: they re-lay as the page arrives "
        "(a layout shift on a busy CPU): fix its column widths at desktop width in extra.css, "
        "as for the API tables or, for a page's table, a <div class=... markdown> around it "
        "as .letter-table on conventions.md"
        for t in page.evaluate(js("table-columns"))
    ]
