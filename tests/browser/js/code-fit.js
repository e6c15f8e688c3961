// At the current width: every code and output block of the article whose lines are wider
// than its box, so that the reader must scroll it sideways to see their ends. Collapsed
// notes are opened for the measurement (and closed again); a block in a content tab that is
// not shown has no width and is not measured.
() => {
  const article = document.querySelector("article.md-content__inner") || document.body;
  const closed = [...article.querySelectorAll("details:not([open])")];
  closed.forEach((d) => { d.open = true; });
  const wide = [];
  [...article.querySelectorAll("pre")].forEach((pre, n) => {
    if (pre.closest(".mermaid, .diagram-box")) return;
    const box = pre.querySelector(":scope > code") || pre;
    if (box.clientWidth === 0) return;
    const over = Math.max(box.scrollWidth - box.clientWidth, pre.scrollWidth - pre.clientWidth);
    if (over <= 1) return;
    const lines = box.textContent.split("\n");
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
    const block = pre.closest(".highlight, .jp-OutputArea-output, .jp-InputArea") || pre;
    const title = block.querySelector(".filename")
      || block.parentElement?.querySelector(":scope > .filename");
    let heading = "";
    for (const h of article.querySelectorAll("h1, h2, h3")) {
      if (h.compareDocumentPosition(pre) & Node.DOCUMENT_POSITION_FOLLOWING) heading = h.textContent;
    }
    wide.push({
      n: n + 1,
      over: Math.round(over),
      title: title ? title.textContent.trim() : "",
      heading: heading.replace("¶", "").trim().slice(0, 60),
      chars: longest.length,
      line: longest.slice(0, 60),
    });
  });
  closed.forEach((d) => { d.open = false; });
  return wide;
}
