// The columns of each API table (mkdocstrings' Parameters, Returns, Raises ...): where its
// header cells sit as the reader sees it, with only its first row, and before Material's
// script has wrapped it in a box of its own (a copy, unwrapped, right after it). A table whose
// columns follow its rows re-lays them while the page is still arriving (its later rows not
// parsed yet, the script not run yet): a layout shift, on a busy CPU. Returns the tables whose
// header cells move, by more than a pixel, between those three.
() => {
  const article = document.querySelector(".md-content article");
  const tables = article ? [...article.querySelectorAll(".doc-contents table")] : [];
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
      found.push({
        where: heading ? heading.id : "",
        header: [...t.querySelectorAll("thead th")].map(th => th.textContent.trim()),
        all, first, unwrapped, rows: later.length + 1,
      });
    }
  }
  return found;
}
