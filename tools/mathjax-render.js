// Typesets the site's math at build time with MathJax itself (mathjax-full, the Node build
// of the same MathJax 3 the pages used to load), so that readers' browsers get finished
// SVG and run no MathJax at all. Driven by hooks/prerender_math.py, one process per build.
//
// Protocol: one JSON request per line on stdin, one JSON answer per line on stdout.
//   {"fragments": ["<span class=\"arithmatex\">\\(x\\)</span>", ...]}
//     -> {"results": [{"html": "<span class=\"arithmatex\"><mjx-container ...", "errors": []}]}
//   {"stylesheet": true} -> {"css": "...", "version": "3.2.2"}
// A fragment is a piece of a page's HTML: an arithmatex <span>/<div>, or a notebook's
// Markdown cell, where nbconvert leaves formulas as $...$ text. MathJax finds the math in it
// exactly as it did in the browser (same delimiters and classes: see OPTIONS), so a page
// reads the same; "errors" lists TeX errors (the hook fails the build with them).
"use strict";

const readline = require("node:readline");
const { mathjax } = require("mathjax-full/js/mathjax.js");
const { TeX } = require("mathjax-full/js/input/tex.js");
const { SVG } = require("mathjax-full/js/output/svg.js");
const { liteAdaptor } = require("mathjax-full/js/adaptors/liteAdaptor.js");
const { RegisterHTMLHandler } = require("mathjax-full/js/handlers/html.js");
const { AssistiveMmlHandler } = require("mathjax-full/js/a11y/assistive-mml.js");
require("mathjax-full/js/input/tex/AllPackages.js"); // registers every TeX package

// What the browser's tex-chtml.js had: base, ams, newcommand, configmacros, and (through
// autoload) the packages below the first line when a formula used one of their macros.
// Not "noundefined": it drew an unknown macro (\sqrtt) as red text instead of an error.
// Not "noerrors" either: errors must stay errors, so the build can fail on them.
const PACKAGES = [
  "base", "ams", "newcommand", "configmacros",
  "action", "amscd", "bbox", "boldsymbol", "braket", "bussproofs", "cancel", "color",
  "enclose", "extpfeil", "html", "mhchem", "unicode", "verb",
];

const adaptor = liteAdaptor();
AssistiveMmlHandler(RegisterHTMLHandler(adaptor)); // keeps a MathML copy for screen readers

let errors = [];
function newTeX() {
  return new TeX({
    packages: PACKAGES,
    // Notebook pages: nbconvert writes every formula of a Markdown cell with dollars.
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true,
    formatError(jax, err) {
      errors.push(err.message);
      return jax.formatError(err);
    },
  });
}

// SVG with each formula's glyphs inside it ("local"): every formula stands alone, so it can
// be cached alone, and no web font has to arrive before the math can be drawn. Sizes are in
// ex of the surrounding text, as the browser's CommonHTML output scaled them.
const svg = new SVG({ fontCache: "local" });

const OPTIONS = {
  // Only what pymdownx.arithmatex marked, and the Markdown cells of notebook pages; ".+"
  // (not ".*|") so that the plain <p> of a notebook's Markdown cell is not skipped.
  ignoreHtmlClass: ".+",
  processHtmlClass: "arithmatex|jp-RenderedMarkdown",
};

function render(fragment) {
  errors = [];
  // A new TeX input per fragment: a macro defined in one formula must not reach another
  // (each fragment is cached on its own, so order must not matter).
  const doc = mathjax.document(`<html><head></head><body>${fragment}</body></html>`, {
    ...OPTIONS,
    InputJax: newTeX(),
    OutputJax: svg,
  });
  doc.render();
  const html = adaptor.innerHTML(adaptor.body(doc.document));
  // An error inside MathJax (not a TeX error) is drawn as an error node too: report it.
  for (const m of html.matchAll(/data-mjx-error="([^"]*)"/g)) {
    if (!errors.includes(m[1])) errors.push(m[1]);
  }
  return { html, errors, formulas: Array.from(doc.math).length };
}

function stylesheet() {
  const doc = mathjax.document("<html><head></head><body></body></html>", {
    ...OPTIONS,
    InputJax: newTeX(),
    OutputJax: svg,
  });
  doc.render();
  // The output's rules plus the assistive MathML's (kept off screen, read aloud).
  return adaptor.textContent(doc.documentStyleSheet());
}

const lines = readline.createInterface({ input: process.stdin, terminal: false });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let answer;
  try {
    const request = JSON.parse(line);
    if (request.stylesheet) {
      answer = { css: stylesheet(), version: mathjax.version };
    } else {
      answer = { results: request.fragments.map(render) };
    }
  } catch (err) {
    answer = { fatal: `${err.name}: ${err.message}` };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
