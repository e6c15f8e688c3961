// At the current width, what makes figures and printed tables hard to read:
// - figures: the article's inline SVG figures (the notebook's matplotlib output) and the size
//   their text (titles, axis and tick labels) is drawn at, in CSS px: the font size in the
//   SVG's own units times the scale the SVG is drawn at (its transform on screen, which takes
//   in its viewBox and how far max-width shrank it). Per figure: the smallest size, and up to
//   3 texts drawn under `minimum` px;
// - tables: printed output (a <pre> whose lines may wrap, as the notebook's do) with rows of
//   columns (two or more lines with a gap of 2+ spaces inside them), and those rows that
//   wrap onto a second line.
// Math, icons and whatever is not drawn (in a closed <details>) are left out.
(minimum) => {
  const article = document.querySelector(".md-content article");
  if (!article) return { figures: [], tables: [] };
  const round = (x) => Math.round(x * 10) / 10;
  const figures = [...article.querySelectorAll("svg")].filter(
    (svg) => !svg.closest("mjx-container, .md-icon, .twemoji, button, label")
      && !svg.parentElement.closest("svg")
      && svg.querySelector("text")
      && svg.getBoundingClientRect().width > 0
  ).map((svg) => {
    // The SVG's scale on screen, times the scale of each transform between it and a text
    // (read from the attributes: asking the layout for every text's matrix costs ~25 ms).
    const det = (m) => Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)); // a rotation is left out
    const root = svg.getScreenCTM();
    const scales = new Map([[svg, root ? det(root) : 0]]);
    const scaleOf = (el) => {
      if (!scales.has(el)) {
        const own = el.transform && el.transform.baseVal.consolidate();
        scales.set(el, scaleOf(el.parentNode) * (own ? det(own.matrix) : 1));
      }
      return scales.get(el);
    };
    const sizes = [];
    for (const text of svg.querySelectorAll("text")) {
      const words = text.textContent.trim();
      if (!words) continue;
      const font = parseFloat(text.style.fontSize || getComputedStyle(text).fontSize);
      sizes.push({ text: words, px: font * scaleOf(text) });
    }
    sizes.sort((x, y) => x.px - y.px);
    const small = sizes.filter((s) => s.px < minimum);
    return {
      what: (svg.getAttribute("aria-label") || svg.id || "inline svg").slice(0, 50),
      texts: sizes.length,
      smallest: sizes.length ? round(sizes[0].px) : null,
      under: small.length,
      small: small.slice(0, 3).map((s) => ({ text: s.text.slice(0, 30), px: round(s.px) })),
    };
  });
  const tables = [];
  const row = /\S {2,}\S/;
  for (const pre of article.querySelectorAll("pre")) {
    if (!/pre-wrap|pre-line|break-spaces/.test(getComputedStyle(pre).whiteSpace)) continue;
    if (pre.getBoundingClientRect().height === 0) continue;
    const text = pre.textContent;
    if (text.split("\n").filter((line) => row.test(line)).length < 2) continue;
    // Each row's text as a range; it wraps when its boxes sit on more than one line.
    const nodes = [];
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(), at = 0; node; node = walker.nextNode()) {
      nodes.push({ node, at });
      at += node.data.length;
    }
    const place = (offset) => {
      let k = nodes.length - 1;
      while (k > 0 && nodes[k].at > offset) k--;
      return [nodes[k].node, Math.min(offset - nodes[k].at, nodes[k].node.data.length)];
    };
    const wrapped = [];
    let start = 0;
    for (const line of text.split("\n")) {
      if (row.test(line)) {
        const range = document.createRange();
        range.setStart(...place(start + line.search(/\S/)));
        range.setEnd(...place(start + line.trimEnd().length));
        const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
        if (tops.size > 1) wrapped.push(line.trim().slice(0, 40));
      }
      start += line.length + 1;
    }
    if (wrapped.length) {
      tables.push({ first: text.trim().split("\n")[0].slice(0, 40), wrapped: wrapped.length,
                    rows: wrapped.slice(0, 2) });
    }
  }
  return { figures, tables };
}
