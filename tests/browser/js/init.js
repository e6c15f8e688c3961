// Runs in every page before its own scripts. Material renders Mermaid into a *closed* shadow
// root; forcing it open lets the checks see the SVG (or the error text) inside. It also
// counts uncaught errors, so that waiting for a diagram that failed does not wait forever.
(() => {
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) {
    return attach.call(this, { ...init, mode: "open" });
  };
  window.__uncaught = 0;
  window.__lastUncaught = 0;
  const seen = () => { window.__uncaught += 1; window.__lastUncaught = performance.now(); };
  window.addEventListener("error", seen);
  window.addEventListener("unhandledrejection", seen);
  // Cumulative layout shift: every shift not caused by the reader's own input (a scroll is
  // not an input here, so a diagram that pushes visible text down counts). Not counted: a
  // shift whose only "moved" elements had no box before, i.e. that appeared rather than
  // moved (chromium may paint a short page before it has parsed its end, and then reports
  // the footer's arrival as a shift from an empty rectangle). They are kept in __appeared.
  window.__cls = 0;
  window.__appeared = [];
  const empty = (r) => !r || (r.width === 0 && r.height === 0);
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      if (e.hadRecentInput) continue;
      const sources = e.sources || [];
      if (sources.length && sources.every((s) => empty(s.previousRect))) {
        window.__appeared.push(e.value);
      } else {
        window.__cls += e.value;
      }
    }
  }).observe({ type: "layout-shift", buffered: true });
})();
