// MathJax 3, served from docs/assets/vendor/mathjax (no CDN).
// Material swaps page content without a reload (instant navigation is off here, but the
// document$ stream is the one hook that fires for every page), so typesetting is driven
// from document$ rather than by MathJax's own start-up pass: letting both run typesets
// each formula twice.
window.MathJax = {
  tex: {
    // Notebook pages: nbconvert writes every formula of a Markdown cell with dollars, whatever
    // the source used. Dollars are looked for only where typesetting happens at all (see
    // processHtmlClass below), never in the rest of a page.
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
    // Without this, an unknown macro (a typo such as \sqrtt) is drawn as red text with no
    // error node, and nothing can tell it from a typeset formula. Removing "noundefined"
    // turns it into a real MathJax error (mjx-merror) that the browser tests catch.
    packages: { "[-]": ["noundefined"] },
  },
  options: {
    // Only typeset what pymdownx.arithmatex marked, and the Markdown cells of notebook pages
    // (mkdocs-jupyter leaves their formulas as text); everything else is left alone.
    // ".+", not ".*|": that would also match elements with no class at all, such as the
    // plain <p> of a notebook's Markdown cell.
    ignoreHtmlClass: ".+",
    processHtmlClass: "arithmatex|jp-RenderedMarkdown",
  },
  chtml: {
    // The fonts are vendored next to tex-chtml.js; the default points at a CDN. The URL is
    // resolved from this script's own address, so it holds on every page depth.
    fontURL: new URL("../vendor/mathjax/output/chtml/fonts/woff-v2", document.currentScript.src).href,
  },
  startup: {
    typeset: false,
  },
};

document$.subscribe(() => {
  MathJax.startup.promise = MathJax.startup.promise
    .then(() => {
      MathJax.typesetClear();
      MathJax.texReset();
      return MathJax.typesetPromise();
    })
    .then(() => document.body.setAttribute("data-math-typeset", "done"));
});
