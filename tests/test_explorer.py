"""Tests for lab/model_cache.py, lab/see_attention.py, the attention explorer and the "See
attention" notebook.

The module's functions are tested directly. The built site (the session's ``built_site``)
must hold the explorer's JSON exactly as explorer_data() makes it, the notebook page with
its figures and without a CDN script; and the models the build trained are reused here,
not trained again. Then a real browser (Debian chromium) opens the attention page, hovers
and focuses tokens and checks that every cell of every head shows the exported weight.

Without chromium the browser tests skip with one line; REQUIRE_BROWSER=1 (CI) makes that a
failure.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import torch

from lab import fingerprint, model_cache, see_attention
from lab.style import INK
from snippets.masks import attention_mask, causal_mask
from tests.conftest import ROOT

ARTIFACTS = ROOT / "test-artifacts" / "explorer"


def _load_hook():
    spec = importlib.util.spec_from_file_location(
        "export_attention", ROOT / "hooks" / "export_attention.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _load_hook()


# --- the cache key ----------------------------------------------------------------------


def _copy_of_the_code(tmp_path) -> Path:
    """snippets/, lab/, data/ and the notebook, copied: files to edit without harm."""
    copy = tmp_path / "repo"
    folders = (("snippets", "*.py"), ("lab", "*.py"), ("data", "*.txt"), ("docs", "*.py"))
    for folder, pattern in folders:
        (copy / folder).mkdir(parents=True)
        for path in (ROOT / folder).glob(pattern):
            (copy / folder / path.name).write_bytes(path.read_bytes())
    return copy


def test_model_cache_key_covers_the_imported_modules_and_the_data(tmp_path, monkeypatch):
    modules = {p.name for p in fingerprint.imported_modules([Path(model_cache.__file__)])}
    assert {"model_cache.py", "char_gpt.py", "induction.py", "attention.py", "model.py"} <= modules
    assert {"paths.py", "common.py", "fingerprint.py"} <= modules
    assert {"corpus.py", "tokenizer.py", "data.py", "objectives.py"} <= modules
    assert "generate.py" not in modules  # a module no training reads changes nothing

    copy = _copy_of_the_code(tmp_path)
    monkeypatch.setattr(model_cache, "__file__", str(copy / "lab" / "model_cache.py"))
    monkeypatch.setattr(model_cache, "ROOT", copy)
    assert_key_follows_the_code(copy, model_cache.fingerprint)


def test_notebook_cache_key_covers_what_the_notebook_imports(tmp_path, monkeypatch):
    copy = _copy_of_the_code(tmp_path)
    monkeypatch.setattr(HOOK, "ROOT", copy)
    notebook = copy / "docs" / "see-attention.py"
    modules = {p.name for p in fingerprint.imported_modules([notebook], copy)}
    assert {"model_cache.py", "char_gpt.py", "induction.py", "style.py", "model.py"} <= modules
    assert_key_follows_the_code(copy, lambda: HOOK.code_fingerprint([notebook]))


def assert_key_follows_the_code(copy: Path, key) -> None:
    """key() changes with any file the models are trained from, and only with those."""
    before = key()
    assert before == key()
    changed_files = ("snippets/attention.py", "snippets/induction.py", "lab/model_cache.py")
    for changed in (*changed_files, "data/guide-snapshot.txt"):
        path = copy / changed
        original = path.read_bytes()
        path.write_bytes(original + b"\n")
        assert key() != before, changed
        path.write_bytes(original)
    (copy / "snippets" / "unrelated.py").write_text("import torch\n")
    assert key() == before


# --- the built site ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(built_site) -> dict:
    return json.loads((built_site / "assets" / "attention-explorer.json").read_text("utf-8"))


def test_the_build_trained_the_models_and_they_are_reused(built_site, monkeypatch):
    """After the build, loading the models must not train: both come from the cache."""

    def no_training(config):
        raise AssertionError(
            "trained again: the build's model was not reused (a .cache/ with only "
            ".cache/trained/ deleted also does this: delete .cache/ as a whole)"
        )

    monkeypatch.setattr(model_cache, "train_induction", no_training)
    monkeypatch.setattr(model_cache, "train_char_gpt", no_training)
    model, losses = model_cache.trained_induction()
    assert len(losses) == model.config.steps
    gpt, char, losses = model_cache.trained_char_gpt()
    assert gpt.config.vocab_size == char.vocab_size
    assert len(losses) == model_cache.CharGPTConfig().steps


def test_built_json_is_what_the_code_exports(exported):
    assert exported == see_attention.explorer_data()


def test_exported_rows_are_attention_rows(exported):
    assert len(exported["examples"]) == 4
    for example in exported["examples"]:
        T = len(example["tokens"])
        assert 10 <= T <= 32
        L, H = len(example["weights"]), len(example["weights"][0])
        assert (L, H) == (2, 4) and len(example["notes"]) == L
        for layer in example["weights"]:
            for head in layer:
                assert [len(row) for row in head] == list(range(1, T + 1))
                for row in head:  # in thousandths, each rounded
                    assert all(type(w) is int for w in row)
                    assert min(row) >= 0 and abs(sum(row) - 1000) <= len(row) / 2
    masks = exported["masks"]
    assert masks["causal"] == causal_mask(5).int().tolist()
    assert masks["both"] == attention_mask(torch.tensor([3]), 5)[0].int().tolist()


def test_explorer_assets_load_only_where_an_explorer_is(built_site):
    for page in built_site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        has = 'class="attention-explorer' in text or 'class="mask-explorer' in text
        assert has == ("attention-explorer.js" in text), page.relative_to(built_site)
    assert "attention-explorer.js" in (built_site / "attention" / "index.html").read_text()


def test_notebook_page_has_its_figures_and_no_cdn(built_site):
    page = (built_site / "see-attention" / "index.html").read_text(encoding="utf-8")
    figures = re.findall(r'<svg[^>]*\bid="figure-(\d+)"[^>]*>', page)
    assert len(figures) >= 5
    tags = re.findall(r'<svg[^>]*\bid="figure-\d+"[^>]*>', page)
    assert all('role="img"' in t and 'aria-label="' in t for t in tags)
    svgs = re.findall(r'<svg[^>]*\bid="figure-\d+".*?</svg>', page, re.S)
    assert svgs and all(f"stroke: {INK}" in svg for svg in svgs)  # the site's one ink
    for printed in ("uniform baseline: 0.042", "layer head  induction", "(L, H, T, T)"):
        assert printed in page
    for remote in ("cdnjs", "mermaid.esm", "x-mathjax-config", "require.js"):
        assert remote not in page, remote
    # The notebook's cache is named after the code: an edit to snippets/ re-runs it.
    key = HOOK.code_fingerprint([ROOT / "docs" / "see-attention.py"])
    assert list((ROOT / ".cache" / "mkdocs-jupyter" / key).glob("*.json"))
    assert (ROOT / ".cache" / "explorer" / f"{key}.json").is_file()


# --- in a real browser ------------------------------------------------------------------


# The browser is the session's one chromium (the ``browser`` fixture of tests/conftest.py),
# shared with tests/test_browser.py; the site is served by the session's ``site_server``.


class Tab:
    """One page of the attention page, in a given colour scheme, with what went wrong."""

    def __init__(self, browser, server, scheme="light"):
        self.problems: list[str] = []
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=scheme
        )
        self.context.set_default_timeout(5000)
        origin = re.escape(server.origin)
        self.context.route(re.compile(rf"^(?!{origin}|data:)"), self._foreign)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda err: self.problems.append(f"page error: {err}"))
        self.page.goto(server.base + "attention/")
        self.page.wait_for_selector(".attention-explorer[data-ready]")
        self.page.wait_for_selector(".mask-explorer[data-ready]")

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


@pytest.mark.browser
def test_mask_toggle_shows_the_exported_masks(tab, exported):
    page = tab.page
    figure = page.locator(".mask-explorer")
    for name in ("padding", "both", "causal"):
        figure.locator(f"button[data-mask='{name}']").click()
        assert page.evaluate(MASK_CELLS) == exported["masks"][name], name
        pressed = figure.locator("button[aria-pressed='true']")
        assert pressed.get_attribute("data-mask") == name


NOTEBOOK_MATH = """
() => {
  const cells = [...document.querySelectorAll(".jp-RenderedMarkdown")];
  const text = cells.map(cell => {
    const copy = cell.cloneNode(true);
    copy.querySelectorAll("code, mjx-container").forEach(el => el.remove());
    return copy.textContent;
  }).join(" ");
  return {
    typeset: cells.reduce((n, cell) => n + cell.querySelectorAll("mjx-container").length, 0),
    errors: document.querySelectorAll(
      ".jp-RenderedMarkdown mjx-merror, .jp-RenderedMarkdown [data-mml-node='merror']").length,
    dollars: (text.match(/\\$/g) || []).length,
    figures: document.querySelectorAll("svg[id^='figure-'][role='img']").length,
  };
}
"""


@pytest.mark.browser
def test_notebook_math_is_typeset_and_figures_shown(browser, site_server):
    """The build typesets the notebook's Markdown cells too (hooks/prerender_math.py), where
    nbconvert writes every formula between dollars; none may be left raw."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.goto(site_server.base + "see-attention/")
        state = page.evaluate(NOTEBOOK_MATH)
    finally:
        context.close()
    assert state["typeset"] >= 10 and state["errors"] == 0, state
    assert state["dollars"] == 0, state
    assert state["figures"] >= 5, state


@pytest.mark.browser
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_explorer_screenshots(browser, site_server, exported, scheme):
    """Pictures to look at (test-artifacts/explorer/): the induction example with a query
    in the second copy, and the mask figure."""
    shot = Tab(browser, site_server, scheme)
    try:
        page = shot.page
        expected = "slate" if scheme == "dark" else "default"
        assert page.evaluate("document.body.dataset.mdColorScheme") == expected
        page.locator(".attention-explorer select").select_option("3")
        example = exported["examples"][3]
        page.locator(".ae-token[data-position='25']").hover()
        assert_rows_show(page, example, 25)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for name in ("attention-explorer", "mask-explorer"):
            path = ARTIFACTS / f"{name}-{scheme}.png"
            page.locator(f".{name}").screenshot(path=str(path))
            assert path.stat().st_size > 5_000
    finally:
        shot.close()
    assert not shot.problems
