// At the current width, the text of the article's image figures: each <img> showing an SVG
// file (lab/figures.py's matplotlib figures are shown so) and the size its text is drawn at, in
// CSS px. An <img> hides its document from the page, so the SVG is fetched and drawn once more,
// out of sight, at the size the <img> is drawn; then, as phone-legibility.js does for inline
// SVG: the font size in the SVG's own units times the scale it is drawn at (its viewBox to
// that size, and each transform between it and a text). Per figure: the smallest size, and up
// to 3 texts drawn under `minimum` px. Images not drawn (in a closed <details>) are left out.
async (minimum) => {
  const article = document.querySelector(".md-content article");
  if (!article) return [];
  const round = (x) => Math.round(x * 10) / 10;
  const det = (m) => Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)); // a rotation is left out
  const images = [...article.querySelectorAll("img")].filter(
    (img) => /\.svg([?#]|$)/i.test(img.currentSrc || img.src)
      && img.getBoundingClientRect().width > 0
  );
  const found = [];
  for (const img of images) {
    const src = img.currentSrc || img.src;
    const what = src.split("/").pop();
    const box = img.getBoundingClientRect();
    let svg;
    try {
      const response = await fetch(src);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const parsed = new DOMParser().parseFromString(await response.text(), "image/svg+xml");
      svg = parsed.documentElement;
      if (svg.localName !== "svg") throw new Error("not an SVG document");
    } catch (error) {
      found.push({ what, error: String(error.message || error) });
      continue;
    }
    const holder = document.createElement("div");
    holder.style.cssText = "position: absolute; left: -20000px; top: 0; visibility: hidden";
    const copy = document.importNode(svg, true);
    copy.setAttribute("width", String(box.width));
    copy.setAttribute("height", String(box.height));
    holder.appendChild(copy);
    document.body.appendChild(holder);
    try {
      const root = copy.getScreenCTM();
      const scales = new Map([[copy, root ? det(root) : 0]]);
      const scaleOf = (el) => {
        if (!scales.has(el)) {
          const own = el.transform && el.transform.baseVal.consolidate();
          scales.set(el, scaleOf(el.parentNode) * (own ? det(own.matrix) : 1));
        }
        return scales.get(el);
      };
      const sizes = [];
      for (const text of copy.querySelectorAll("text")) {
        const words = text.textContent.trim();
        if (!words) continue;
        const font = parseFloat(text.style.fontSize || getComputedStyle(text).fontSize);
        sizes.push({ text: words, px: font * scaleOf(text) });
      }
      sizes.sort((x, y) => x.px - y.px);
      const small = sizes.filter((s) => s.px < minimum);
      found.push({
        what,
        width: round(box.width),
        texts: sizes.length,
        smallest: sizes.length ? round(sizes[0].px) : null,
        under: small.length,
        small: small.slice(0, 3).map((s) => ({ text: s.text.slice(0, 30), px: round(s.px) })),
      });
    } finally {
      holder.remove();
    }
  }
  return found;
}
