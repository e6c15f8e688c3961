// Scrolls down the page one screen at a time, as a fast reader would, and notes for each
// diagram whether it was drawn when its top first came on screen, or how long it took after
// that (the wait a reader sees). Returns to the top afterwards. Past the last diagram nothing
// loads on the way down, so the rest is scrolled at the quicker step.
async ([diagramStepMs, plainStepMs]) => {
  // The next frame; or 100 ms, should the browser stop drawing frames (it then never calls
  // requestAnimationFrame back, and this evaluate, which has no timeout, would never return).
  const frame = () => new Promise(r => { requestAnimationFrame(r); setTimeout(r, 100); });
  const sleep = ms => new Promise(r => setTimeout(r, ms));
  const diagrams = [...document.querySelectorAll("pre.mermaid")];
  const drawn = pre => !pre.isConnected;  // Material replaces the <pre> with its drawing
  const waits = diagrams.map(() => undefined);
  const failed = () => window.__uncaught && performance.now() - window.__lastUncaught > 300;
  for (let y = 0; ; y += innerHeight) {
    window.scrollTo(0, y);
    await frame();
    for (const [n, pre] of diagrams.entries()) {
      if (waits[n] !== undefined) continue;
      const r = pre.isConnected ? pre.getBoundingClientRect() : null;
      if (r && (r.top >= innerHeight || r.width === 0)) continue;  // not reached, or hidden
      if (drawn(pre)) { waits[n] = 0; continue; }
      const t0 = performance.now();
      while (!drawn(pre) && !failed() && performance.now() - t0 < 10000) await frame();
      waits[n] = drawn(pre) ? Math.round(performance.now() - t0) : null;
    }
    if (y + innerHeight >= document.documentElement.scrollHeight) break;
    // At a reader's pace while a diagram is still ahead; past the last one, quickly.
    await sleep(waits.some(w => w === undefined) ? diagramStepMs : plainStepMs);
  }
  window.scrollTo(0, 0);
  await frame();
  return waits.map(w => (w === undefined ? null : w));
}
