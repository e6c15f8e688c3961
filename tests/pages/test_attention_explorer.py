"""The attention pages' two explorers in a real browser (Debian chromium): hovering and
focusing tokens shows every head's exported weights, the keyboard moves the query, the mask
buttons show the exported masks; screenshots in test-artifacts/explorer/.

Without chromium the tests skip with one line; REQUIRE_BROWSER=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import re

import pytest

from lab.shared.common import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "explorer"


@pytest.fixture(scope="module")
def exported(built_site) -> dict:
    return json.loads((built_site / "assets" / "attention-explorer.json").read_text("utf-8"))


# The browser is the session's one chromium (the ``browser`` fixture of tests/conftest.py),
# shared with tests/pages/test_browser.py; the site is served by the session's ``site_server``.


# Each explorer's page: the heads on the second attention page, the masks on the first.
PAGES = {"attention-explorer": "multi-head/", "mask-explorer": "generation-in-depth/"}


class Tab:
    """One explorer's page, in a given colour scheme, with what went wrong."""

    def __init__(self, browser, server, scheme="light", explorer="attention-explorer"):
        self.problems: list[str] = []
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=scheme
        )
        # 15 s, as the browser harness allows: the attention page, loaded while the other
        # workers run, took over 5 s on this project's 2-core AMD machine (twice in a run).
        self.context.set_default_timeout(15_000)
        origin = re.escape(server.origin)
        self.context.route(re.compile(rf"^(?!{origin}|data:)"), self._foreign)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self.problems.append(f"page error: {err}"))
        self.page.goto(server.base + PAGES[explorer])
        self.page.wait_for_selector(f".{explorer}[data-ready]")

    def _foreign(self, route):
        self.problems.append(f"request to another host: {route.request.url}")
        route.abort()

    def _console(self, msg):
        if msg.type == "error":
            self.problems.append(f"console error: {msg.text}")

    def close(self):
        self.context.close()


@pytest.fixture(scope="module")
def tab(browser, site_server):
    tab = Tab(browser, site_server)
    yield tab
    tab.close()
    assert not tab.problems


ROWS = """
() => [...document.querySelectorAll(".attention-explorer .ae-row--head")].map(row => ({
  layer: Number(row.dataset.layer),
  head: Number(row.dataset.head),
  label: row.getAttribute("aria-label"),
  cells: [...row.querySelectorAll(".ae-cell")].map(cell => ({
    weight: cell.dataset.weight === undefined ? null : Number(cell.dataset.weight),
    w: cell.style.getPropertyValue("--w"),
    masked: cell.classList.contains("ae-cell--masked"),
  })),
}))
"""

PRESSED = """
() => [...document.querySelectorAll(".attention-explorer .ae-token")]
  .map(b => b.getAttribute("aria-pressed") === "true")
"""


def assert_rows_show(page, example: dict, t: int) -> None:
    """Every head's row shows query t's exported weights; later keys are masked."""
    pressed = page.evaluate(PRESSED)
    assert pressed == [i == t for i in range(len(example["tokens"]))]
    rows = page.evaluate(ROWS)
    assert len(rows) == 8
    for row in rows:
        expected = [w / 1000 for w in example["weights"][row["layer"]][row["head"]][t]]
        shown = [c["weight"] for c in row["cells"][: t + 1]]
        assert shown == expected, (row["layer"], row["head"], t)
        assert [float(c["w"]) for c in row["cells"][: t + 1]] == expected
        assert not any(c["masked"] for c in row["cells"][: t + 1])
        later = row["cells"][t + 1 :]
        assert all(c["masked"] and c["weight"] is None and c["w"] == "" for c in later)
        best = max(range(t + 1), key=lambda s: (expected[s], -s))
        said = re.search(r"\(token (\d+)\), ([\d.]+)$", row["label"])
        assert int(said[1]) == best + 1, row["label"]
        assert abs(float(said[2]) - expected[best]) <= 0.005 + 1e-9, row["label"]


@pytest.mark.browser
def test_hovering_a_token_shows_its_exported_rows(tab, exported):
    page = tab.page
    select = page.locator(".attention-explorer select")
    for n, example in enumerate(exported["examples"]):
        page.mouse.move(0, 0)  # off the tokens, which the new input redraws
        select.select_option(str(n))
        T = len(example["tokens"])
        assert_rows_show(page, example, T - 1)  # an input opens on its last token
        for t in sorted({0, 1, T // 2, T - 2, T - 1}):
            page.locator(f".ae-token[data-position='{t}']").hover()
            assert_rows_show(page, example, t)


@pytest.mark.browser
def test_keyboard_moves_the_query(tab, exported):
    page = tab.page
    page.mouse.move(0, 0)  # a pointer resting on a token would select it too
    page.locator(".attention-explorer select").select_option("3")
    example = exported["examples"][3]
    T = len(example["tokens"])
    page.locator(".ae-token[data-position='20']").focus()
    assert_rows_show(page, example, 20)
    moves = [("ArrowLeft", 19), ("ArrowLeft", 18), ("ArrowRight", 19), ("Home", 0)]
    for key, t in moves:
        page.keyboard.press(key)
        assert_rows_show(page, example, t)
        focused = page.evaluate("() => document.activeElement.dataset.position")
        assert focused == str(t)
    page.keyboard.press("ArrowLeft")  # at the first token: stays there
    assert_rows_show(page, example, 0)
    page.keyboard.press("End")
    assert_rows_show(page, example, T - 1)
    # One tab stop for the whole row of tokens: the selected one.
    tabbable = page.evaluate(
        "() => [...document.querySelectorAll('.ae-token')]"
        ".filter(b => b.tabIndex === 0).map(b => b.dataset.position)"
    )
    assert tabbable == [str(T - 1)]
    status = page.locator(".attention-explorer .ae-status").text_content()
    assert status.startswith(f"Query “{example['tokens'][-1]}”, token {T}.")


MASK_CELLS = """
() => [...document.querySelectorAll('.mask-explorer tr')].slice(1)
  .map(tr => [...tr.querySelectorAll('td')].map(td => Number(td.dataset.allowed)))
"""


@pytest.fixture(scope="module")
def mask_tab(browser, site_server):
    tab = Tab(browser, site_server, explorer="mask-explorer")
    yield tab
    tab.close()
    assert not tab.problems


@pytest.mark.browser
def test_mask_toggle_shows_the_exported_masks(mask_tab, exported):
    page = mask_tab.page
    figure = page.locator(".mask-explorer")
    for name in ("padding", "both", "causal"):
        figure.locator(f"button[data-mask='{name}']").click()
        assert page.evaluate(MASK_CELLS) == exported["masks"][name], name
        pressed = figure.locator("button[aria-pressed='true']")
        assert pressed.get_attribute("data-mask") == name


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_explorer_screenshots(browser, site_server, exported, scheme):
    """Pictures to look at (test-artifacts/explorer/): the induction example with a query
    in the second copy, and the mask figure."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        shot = Tab(browser, site_server, scheme, explorer=name)
        try:
            page = shot.page
            expected = "slate" if scheme == "dark" else "default"
            assert page.evaluate("document.body.dataset.mdColorScheme") == expected
            if name == "attention-explorer":
                page.locator(".attention-explorer select").select_option("3")
                example = exported["examples"][3]
                page.locator(".ae-token[data-position='25']").hover()
                assert_rows_show(page, example, 25)
            path = ARTIFACTS / f"{name}-{scheme}.png"
            page.locator(f".{name}").screenshot(path=str(path))
            assert path.stat().st_size > 5_000
        finally:
            shot.close()
        assert not shot.problems
