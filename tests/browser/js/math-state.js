// What the math of the page looks like: formulas typeset or not, errors, raw TeX left in the
// text, formulas without glyphs or without their MathML copy, MathJax running in the page.
() => {
  const article = document.querySelector(".md-content article");
  const formulas = article ? [...article.querySelectorAll("mjx-container")] : [];
  const marked = [...document.querySelectorAll(".arithmatex")];
  const visible = el => el.getClientRects().length > 0;
  // The article's text outside code and typeset math; notebook cells separately, since
  // nbconvert leaves their formulas between dollars.
  const textOf = (el) => {
    if (!el) return "";
    const copy = el.cloneNode(true);
    copy.querySelectorAll("pre, code, .highlight, mjx-container").forEach(e => e.remove());
    return copy.textContent;
  };
  const raw = [];
  const look = (text, delimiters) => {
    for (const delimiter of delimiters) {
      let at = text.indexOf(delimiter);
      while (at !== -1 && raw.length < 10) {
        raw.push(text.slice(Math.max(0, at - 30), at + 40).replace(/\s+/g, " "));
        at = text.indexOf(delimiter, at + 1);
      }
    }
  };
  look(textOf(article), ["\\(", "\\[", "$$"]);
  document.querySelectorAll(".jp-RenderedMarkdown").forEach(cell => look(textOf(cell), ["$"]));
  return {
    formulas: formulas.length,
    marked: marked.length,
    untypeset: marked.filter(el => !el.querySelector("mjx-container"))
      .map(el => el.textContent.slice(0, 80)),
    errors: [...document.querySelectorAll("mjx-merror, [data-mml-node='merror']")].map(el =>
      (el.getAttribute("data-mjx-error") || el.closest("mjx-container").textContent)
        .slice(0, 120)),
    nested: document.querySelectorAll("mjx-container mjx-container").length,
    raw,
    flat: formulas.filter(el => visible(el) && el.getBoundingClientRect().width === 0).length,
    // SVG output: every glyph is a <path> (or a <use> of one); CommonHTML: <mjx-c>.
    glyphless: formulas.filter(el => !el.querySelector("svg path, svg use, mjx-c"))
      .map(el => el.textContent.slice(0, 40)),
    // What screen readers read: MathJax's assistive MathML copy of each formula.
    noMathML: formulas.filter(el => !el.querySelector("mjx-assistive-mml math")).length,
    runtime: typeof window.MathJax !== "undefined",
  };
}
