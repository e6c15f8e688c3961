// Each SVG formula drawn at the size MathJax gave it (its width and height attributes, in ex
// of the text around it): a stylesheet that caps SVG sizes can shrink a formula to nothing.
() => {
  const out = [];
  for (const c of document.querySelectorAll(".md-content mjx-container[jax='SVG']")) {
    const svg = c.querySelector(":scope > svg");
    if (!svg || c.getClientRects().length === 0) continue;
    const probe = document.createElement("span");
    probe.style.cssText = "position:absolute;visibility:hidden;width:10ex;height:0";
    c.append(probe);
    const ex = probe.getBoundingClientRect().width / 10;
    probe.remove();
    const want = ["width", "height"].map(a => parseFloat(svg.getAttribute(a)) * ex);
    const r = svg.getBoundingClientRect();
    const got = [r.width, r.height];
    if (want.some((w, i) => Math.abs(got[i] - w) > 0.25 * w + 1)) {
      out.push({text: c.textContent.slice(0, 30), want: want.map(Math.round),
                got: got.map(Math.round)});
    }
  }
  return out;
}
