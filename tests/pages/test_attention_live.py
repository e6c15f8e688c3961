"""The attention page runs the guide's char GPT in the reader's browser (attention-live.js).

In a real browser (Debian chromium): window.attentionGuide.run(text) gives, for several texts,
the weights and logits PyTorch computes with the checkpoint the page names
(window.attentionGuide.checkpoint, loaded by snippets.run.generate.load_model), and its greedy
continuation is PyTorch's; a planted model, one head's weights zeroed and served at the same
URL, fails that comparison. Nothing of the model loads before the text box is used, and no
request leaves the site. The bytes loaded before and after the text box is used, the time to
the first result and each keystroke's redraw are measured into test-artifacts/live/report.json
(a report, not a timed assertion); screenshots at 1280 and 390 px in both colour schemes go to
test-artifacts/live/.
"""

from __future__ import annotations

import json
import os
import statistics
import urllib.request

import pytest
import torch

from lab.recipes.live_model import export
from lab.shared.common import ROOT
from snippets.run.generate import generate, load_model
from tests.pages.test_attention_explorer import Tab

ARTIFACTS = ROOT / "test-artifacts" / "live"
TEXTS = [
    "The attention of a head",
    "a",
    "Queries, keys and values: each head reads them.",  # longer than the context: cropped
    "softmax(q @ k^T / sqrt(D))",
]
NEW_TOKENS = 20
WEIGHTS_TOL = 1e-5
LOGITS_TOL = 1e-4
PLANTED = (1, 2)  # layer and head (0-based) whose weights the planted model has zeroed

RUN = "(text) => window.attentionGuide.run(text)"
GREEDY = f"(text) => window.attentionGuide.generate(text, {NEW_TOKENS}, {{temperature: 0}})"
LOADED = """
() => performance.getEntriesByType("resource").concat(performance.getEntriesByType("navigation"))
  .map(e => ({name: e.name, bytes: e.encodedBodySize}))
"""


@pytest.fixture(scope="module")
def checkpoint(browser, site_server):
    """The model the page says it runs, loaded as the reader would: its URL, then load_model."""
    tab = Tab(browser, site_server)
    try:
        relative = tab.page.evaluate("window.attentionGuide.checkpoint")
        url = tab.page.evaluate("(r) => new URL(r, location.href).href", relative)
    finally:
        tab.close()
    assert not tab.problems
    assert relative == "../assets/live/char-gpt.pt"  # relative to the page, as the issue asks
    with urllib.request.urlopen(url) as response:
        path = ARTIFACTS / "char-gpt.pt"
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path.write_bytes(response.read())
    return load_model(path)


def pytorch(model, chars: str, text: str) -> dict:
    """What the page should give for text: its last context_length characters' tokens,
    weights (L, H, T, T), logits (T, V), and the greedy continuation."""
    T_max = model.config.context_length
    tokens = list(text)[-T_max:]
    idx = torch.tensor([[chars.index(ch) for ch in tokens]])
    with torch.no_grad():
        logits, _, weights = model(idx, return_weights=True)
    whole = torch.tensor([[chars.index(ch) for ch in text]])
    new = generate(model, whole, NEW_TOKENS, greedy=True)[0, whole.size(1) :]
    return {
        "tokens": tokens,
        "weights": torch.stack(weights, dim=1)[0].double(),  # (L, H, T, T)
        "logits": logits[0].double(),  # (T, V)
        "continuation": "".join(chars[i] for i in new.tolist()),
    }


def differences(page, model, chars: str, text: str) -> list[str]:
    """Where the page's run() and greedy continuation differ from PyTorch's, per head."""
    expected = pytorch(model, chars, text)
    got = page.evaluate(RUN, text)
    if got["tokens"] != expected["tokens"]:
        return [f"{text!r}: tokens {got['tokens']} != {expected['tokens']}"]
    problems = []
    weights = torch.tensor(got["weights"], dtype=torch.float64)
    if weights.shape != expected["weights"].shape:
        return [f"{text!r}: weights {tuple(weights.shape)} != {expected['weights'].shape}"]
    gap = (weights - expected["weights"]).abs().amax(dim=(-1, -2))  # (L, H)
    for layer, head in (gap > WEIGHTS_TOL).nonzero().tolist():
        problems.append(
            f"{text!r}: layer {layer + 1} head {head + 1} weights differ by "
            f"{gap[layer, head].item():.2e} (> {WEIGHTS_TOL})"
        )
    logits = torch.tensor(got["logits"], dtype=torch.float64)
    worst = (logits - expected["logits"]).abs().max().item()
    if worst > LOGITS_TOL:
        problems.append(f"{text!r}: logits differ by {worst:.2e} (> {LOGITS_TOL})")
    continuation = page.evaluate(GREEDY, text)
    if continuation != expected["continuation"]:
        problems.append(
            f"{text!r}: greedy continuation {continuation!r} != {expected['continuation']!r}"
        )
    return problems


@pytest.mark.browser
def test_the_page_computes_what_pytorch_computes(browser, site_server, checkpoint):
    model, chars = checkpoint
    assert all(ch in chars for text in TEXTS for ch in text)
    tab = Tab(browser, site_server)
    try:
        problems = [p for text in TEXTS for p in differences(tab.page, model, chars, text)]
        assert not problems, "\n".join(problems)
        # A character the model does not know: an error that names it.
        message = tab.page.evaluate(
            "() => window.attentionGuide.run('café €').then(() => null, e => e.message)"
        )
        assert message.startswith("The model does not know “é”, “€”:"), message
    finally:
        tab.close()
    assert not tab.problems


@pytest.mark.browser
def test_a_planted_head_fails_the_comparison(browser, site_server, checkpoint):
    """The same comparison, with the page served a model whose one head is zeroed."""
    model, chars = checkpoint
    planted = load_model(ARTIFACTS / "char-gpt.pt")[0]
    layer, head = PLANTED
    D = planted.config.n_embed // planted.config.n_head
    C = planted.config.n_embed
    with torch.no_grad():
        qkv = planted.blocks[layer].attn.qkv.weight  # (3C, C): queries, keys, values
        for part in range(3):
            qkv[part * C + head * D : part * C + (head + 1) * D] = 0
    _, weights = export(planted, chars)
    tab = Tab(browser, site_server)
    try:
        tab.context.route("**/assets/live/char-gpt.bin", lambda route: route.fulfill(body=weights))
        problems = [p for text in TEXTS for p in differences(tab.page, model, chars, text)]
    finally:
        tab.close()
    assert not tab.problems
    name = f"layer {layer + 1} head {head + 1} weights differ"
    assert any(name in p for p in problems), problems
    assert any("continuation" in p for p in problems), problems


TYPE = """
async (text) => {
  const root = document.querySelector(".attention-explorer");
  const box = root.querySelector(".ae-text");
  const before = root.dataset.live;
  const start = performance.now();
  box.focus();
  box.value = text;
  box.dispatchEvent(new Event("input"));
  while (root.dataset.live === before) await new Promise((resolve) => setTimeout(resolve, 0));
  await new Promise(requestAnimationFrame); // the frame that shows it
  return performance.now() - start;
}
"""
# The same wait after changing one line of text: what any redraw of this page costs here.
BASELINE = """
async (n) => {
  const status = document.querySelector(".ae-live-status");
  const times = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    status.textContent = "·".repeat(i + 1);
    await new Promise((resolve) => setTimeout(resolve, 0));
    await new Promise(requestAnimationFrame);
    times.push(performance.now() - start);
  }
  return times;
}
"""
# The model alone: run() on each prefix of a text, no drawing.
RUN_ONLY = """
async (text) => {
  const times = [];
  for (let i = 1; i <= text.length; i++) {
    const start = performance.now();
    await window.attentionGuide.run(text.slice(0, i));
    times.push(performance.now() - start);
  }
  return times;
}
"""


def summary(times: list[float]) -> dict:
    ordered = sorted(times)
    return {
        "median": round(statistics.median(ordered), 1),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 1),
        "max": round(ordered[-1], 1),
        "n": len(ordered),
    }


@pytest.mark.browser
def test_the_text_box_loads_the_model_and_reports_its_cost(browser, site_server, checkpoint):
    """Nothing of the model before the box is used; then the reader's text drawn, every head,
    the next characters, and greedy Continue as PyTorch writes on. Bytes and times reported."""
    model, chars = checkpoint
    tab = Tab(browser, site_server)
    page = tab.page
    try:
        page.wait_for_load_state("networkidle")
        before = page.evaluate(LOADED)
        assert not [e for e in before if "attention-live" in e["name"] or "/live/" in e["name"]]
        first = page.evaluate(TYPE, "The head")
        after = page.evaluate(LOADED)
        keystrokes = []
        for ch in " looks back at the keys":
            text = page.locator(".ae-text").input_value() + ch
            keystrokes.append(page.evaluate(TYPE, text))
        baseline = page.evaluate(BASELINE, 20)
        model_only = page.evaluate(RUN_ONLY, "The head looks back at the keys")
        rows = page.locator(".attention-explorer .ae-row--head")
        assert rows.count() == 8
        assert page.locator(".ae-token").count() == len("The head looks back at the keys")
        assert page.locator(".ae-next-item").count() == 5
        # Greedy Continue writes on as PyTorch does.
        page.locator("input[id$='-temperature']").fill("0")
        page.locator(".ae-continue").click()
        page.wait_for_function("() => !document.querySelector('.ae-continue').disabled")
        written = page.locator(".ae-text").input_value()
        expected = pytorch(model, chars, "The head looks back at the keys")["continuation"]
        assert written == "The head looks back at the keys" + expected
        # An unknown character: the message names it, the last drawing stays.
        page.locator(".ae-text").fill("naïve")
        status = page.locator(".ae-live-status")
        page.wait_for_function(
            "(el) => el.textContent.startsWith('The model does not know')",
            arg=status.element_handle(),
        )
        assert status.text_content().startswith("The model does not know “ï”:")
        assert page.locator(".ae-token").count() == len(written[-32:])  # the last drawing
    finally:
        tab.close()
    assert not tab.problems  # no request left the site, no console error
    new = [e for e in after if e["name"] not in {b["name"] for b in before}]
    report = {
        "bytes_before_text_box": sum(e["bytes"] for e in before),
        "bytes_loaded_by_text_box": {e["name"].rsplit("/", 1)[-1]: e["bytes"] for e in new},
        "first_result_ms": round(first, 1),
        "keystroke_redraw_ms": summary(keystrokes),
        "run_only_ms": summary(model_only),
        "one_line_redraw_ms": summary(baseline),
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


@pytest.mark.browser
@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_live_screenshots(browser, site_server, width, scheme):
    """Pictures to look at: the explorer with the reader's text, at a desktop and a phone width."""
    tab = Tab(browser, site_server, scheme)
    try:
        page = tab.page
        page.set_viewport_size({"width": width, "height": 900})
        page.locator(".ae-text").fill("Each head reads the keys")
        page.wait_for_selector(".attention-explorer[data-live]")
        page.locator(".ae-token[data-position='10']").hover()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"live-{width}-{scheme}.png"
        page.locator(".attention-explorer").screenshot(path=str(path))
        assert path.stat().st_size > 5_000
        wide = page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= width, f"the page is {wide} px wide at a {width} px viewport"
    finally:
        tab.close()
    assert not tab.problems
