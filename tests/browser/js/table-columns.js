// The columns of each API table (mkdocstrings' Parameters, Returns, Raises ...) and of every
// table that starts on the first screen: where its header cells sit as the reader sees it,
// with only its first row, and before Material's script has wrapped it in a box of its own (a
// copy, unwrapped, right after it). A table whose columns follow its rows re-lays them while
// the page is still arriving (its later rows not parsed yet, the script not run yet): a layout
// shift whenever the browser paints mid-table, which a load sent at once does only on a busy
// CPU. Below the first screen a re-lay is mostly over before the reader scrolls there (most
// of the site's tables follow their rows); the API tables, which links open at, are all
// checked. Returns the tables whose header cells move, by more than a pixel, between those
// three.
() => {
  const article = document.querySelector(".md-content article");
  const top = t => t.getBoundingClientRect().top + scrollY;
  const tables = article ? [...article.querySelectorAll("table")].filter(
    t => t.closest(".doc-contents") || top(t) < innerHeight) : [];
  const lefts = t => [...t.querySelectorAll("thead th")]
    .map(th => Math.round(th.getBoundingClientRect().left));
  const moved = (a, b) => a.length !== b.length || a.some((x, i) => Math.abs(x - b[i]) > 1);
  const found = [];
  for (const t of tables) {
    const all = lefts(t);
    const later = [...t.querySelectorAll("tbody tr")].slice(1);
    later.forEach(r => { r.style.display = "none"; });
    const first = lefts(t);
    later.forEach(r => { r.style.display = ""; });
    const box = t.closest(".md-typeset__scrollwrap") || t;
    const copy = t.cloneNode(true);
    box.after(copy);
    const unwrapped = lefts(copy);
    copy.remove();
    if (moved(all, first) || moved(all, unwrapped)) {
      const object = t.closest(".doc-object");
      const heading = object && object.querySelector(".doc-heading");
      const section = [...article.querySelectorAll("h1[id], h2[id], h3[id]")]
        .filter(h => h.compareDocumentPosition(t) & Node.DOCUMENT_POSITION_FOLLOWING).pop();
      found.push({
        api: Boolean(t.closest(".doc-contents")),
        where: heading ? heading.id : section ? section.id : "",
        header: [...t.querySelectorAll("thead th")].map(th => th.textContent.trim()),
        all, first, unwrapped, rows: later.length + 1,
      });
    }
  }
  return found;
}
