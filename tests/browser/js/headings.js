// The article's headings: the h1s, each level jump deeper by more than one (h2 then h4), and
// the headings without an id (no #anchor for the table of contents or a link) or without text.
() => {
  const article = document.querySelector(".md-content article");
  const hs = article ? [...article.querySelectorAll("h1, h2, h3, h4, h5, h6")] : [];
  const text = h => h.textContent.replace(/¶/g, "").trim().slice(0, 60);
  const skips = [];
  let level = 0;
  for (const h of hs) {
    const n = Number(h.tagName[1]);
    if (level && n > level + 1) skips.push({from: level, to: n, text: text(h)});
    level = n;
  }
  const ids = hs.map(h => h.id).filter(Boolean);
  return {
    count: hs.length,
    h1: hs.filter(h => h.tagName === "H1").map(text),
    skips: skips.slice(0, 5),
    noId: hs.filter(h => h.tagName !== "H1" && !h.id).map(text).slice(0, 5),
    empty: hs.filter(h => !text(h)).length,
    duplicateIds: [...new Set(ids.filter((id, i) => ids.indexOf(id) !== i))].slice(0, 5),
  };
}
