"""hooks/page_downloads.py's plan: which blocks a page's downloads run, and what they lend.

The downloads themselves are built and run as a reader would in tests/pages/test_downloads.py;
here, the plan on a few made-up blocks.
"""

from hooks.page_downloads import left_out_reasons, plan, script_cells
from hooks.page_parser import Block


def blocks(*codes: str) -> list[Block]:
    return [
        Block("docs/page.md", 10 * n, 10 * n + 5, "", "python", None, code, [])
        for n, code in enumerate(codes, start=1)
    ]


def test_a_left_out_block_lends_an_import_a_later_block_rebinds_where_it_stood():
    # The first block is left out (it imports lab); the second uses its snippets import,
    # which the third rebinds (the page shows the same function), so the import cannot go
    # to the top: it runs in the left-out block's place, and the second block is kept.
    page = blocks(
        "from lab.shared.common import RESULTS_DIR\nfrom snippets.sparse import gather\n",
        "print(gather(3))\n",
        "def gather(n):\n    return n\n",
    )
    imports, cells = plan(page)
    assert "imports lab.shared.common" in cells[0].left_out
    assert cells[0].imports_in_place == ["from snippets.sparse import gather"]
    assert cells[1].left_out is None and cells[1].needs == ["gather"]
    source = script_cells("docs/page.md", imports, cells)[0][0]
    assert "# from lab.shared.common import RESULTS_DIR" in source  # commented: not run
    assert source.rstrip().endswith("\nfrom snippets.sparse import gather")  # run


def test_a_left_out_blocks_checkout_imports_stay_out():
    page = blocks("from lab.shared.common import RESULTS_DIR\n", "print(RESULTS_DIR)\n")
    imports, cells = plan(page)
    assert imports == [] and cells[0].imports_in_place == []
    assert "needs the block at docs/page.md:10" in cells[1].left_out


def test_a_collapsed_block_is_a_hidden_cell_and_a_solution_asks_to_try_first(tmp_path):
    from hooks.page_downloads import as_notebook, as_script
    from hooks.page_parser import parse_page

    fence = "```"
    page = tmp_path / "docs" / "page.md"
    page.parent.mkdir()
    page.write_text(
        f"{fence}python\ndef f():\n    return 0  # your code here\n{fence}\n\n"
        f'??? success "A solution"\n\n    {fence}python\n    def f():\n        return 1\n'
        f'    {fence}\n\n???+ note "Open"\n\n    {fence}python\n    f()\n    {fence}\n\n'
        f"!!! note\n\n    {fence}python\n    f()\n    {fence}\n\n"
        f'??? note "The checks"\n\n    {fence}python\n    f()\n    {fence}\n'
    )
    blocks = parse_page(page, tmp_path, lambda lines: lines)
    assert [b.collapsed for b in blocks] == [None, "A solution", None, None, "The checks"]
    imports, cells = plan(blocks)
    out = script_cells("docs/page.md", imports, cells)
    assert [hidden for *_, hidden in out] == [False, True, False, False, True]
    assert out[1][0].startswith(
        "# A solution, collapsed on the page (hidden in the notebook): try your own first.\n"
    )
    assert "def f():\n    return 1" in out[1][0] and "try your own" not in out[0][0]
    assert out[4][0].startswith("# The checks, collapsed on the page (hidden in the notebook).\n")
    notebook = as_notebook("Page", "page/", out)["cells"][1:]  # after the title
    assert [c["metadata"].get("jupyter") for c in notebook] == [
        None,
        {"source_hidden": True},
        None,
        None,
        {"source_hidden": True},
    ]
    script = as_script("Page", "page/", out)
    assert script.index("return 0") < script.index("# A solution") < script.index("return 1")


def test_the_header_names_only_the_reasons_that_occur():
    # A page whose only left-out block is skipped on the page: the header says so, and does
    # not claim a block needs a committed result file (as a fixed sentence did).
    page = blocks("print(1)\n", "print(2)\n")
    page[1].skip = "takes minutes"
    _, cells = plan(page)
    assert left_out_reasons(cells) == "they are not run on the page"
    page = blocks("from lab.shared.common import RESULTS_DIR\n", "print(RESULTS_DIR)\n")
    _, cells = plan(page)
    assert left_out_reasons(cells) == (
        "they import the guide's tooling (lab/, tests/) or use what such a block made"
    )
