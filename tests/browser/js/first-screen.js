// The time since navigation start (ms) once the first screen is complete: the browser has
// parsed the page past the bottom of the first screen (or to its end), its fonts settled,
// every formula typeset (pages typeset at build have no MathJax; one that runs MathJax in the
// browser sets data-math-typeset="done" when it finishes), and every image and diagram that
// shows on the first screen is drawn. A diagram that fails stays a <pre> and raises an
// uncaught error: then give up on it 300 ms after the last error.
() => {
  const body = document.body;
  if (!body) return false;
  if (document.readyState === "loading") {
    // Still parsing: done with the first screen once the newest element of the article
    // (the end of its last-child chain) starts below it.
    let last = document.querySelector(".md-content article");
    while (last && last.lastElementChild) last = last.lastElementChild;
    if (!last || last.getBoundingClientRect().top < innerHeight) return false;
  }
  if (window.MathJax && body.dataset.mathTypeset !== "done") return false;
  if (document.fonts.status !== "loaded") return false;
  const shown = (el) => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.bottom > 0 && r.top < innerHeight;
  };
  // Math on the first screen typeset (by the build, or by a MathJax still to come).
  const marked = document.querySelectorAll(".arithmatex, .jp-RenderedMarkdown");
  for (const el of marked) {
    if (!shown(el)) continue;
    if (el.classList.contains("arithmatex") ? !el.querySelector("mjx-container")
        : /\$/.test([...el.childNodes].map(n => n.nodeName === "P" ? n.textContent : "")
                       .join(""))) return false;
  }
  const waiting = [...document.querySelectorAll("pre.mermaid")].filter(shown).length;
  if (waiting && !(window.__uncaught && performance.now() - window.__lastUncaught > 300)) {
    return false;
  }
  if ([...document.querySelectorAll(".md-content img")].some(i => shown(i) && !i.complete)) {
    return false;
  }
  return performance.now();
}
