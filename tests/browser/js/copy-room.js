// At the current width: code lines whose end the copy button covers. A line's end is its
// last character other than a space; it is covered when the part of its box that the block
// shows (inside the box that scrolls) overlaps the button's box.
// Each block is looked at scrolled to its start and to its end (a long line's end is seen
// only there), then put back. Material's blocks (pre > code, the button in the <pre>) and
// the notebook's cells (the button beside the highlighted <pre>); blocks not drawn (in a
// closed <details>) are left out.
() => {
  const found = [];
  const blocks = [];
  document.querySelectorAll(".md-content pre > code").forEach((code) => {
    const button = code.parentElement.querySelector(
      ':scope > nav > [data-md-type="copy"], :scope > .md-clipboard');
    if (button) blocks.push({ code, button, box: code.parentElement });
  });
  document.querySelectorAll(".md-content .jp-InputArea-editor").forEach((editor) => {
    const code = editor.querySelector(".highlight-ipynb pre, .highlight pre");
    const button = editor.querySelector("clipboard-copy, .zeroclipboard-container");
    if (code && button) blocks.push({ code, button, box: editor });
  });
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  blocks.forEach(({ code, button, box }, n) => {
    const b = button.getBoundingClientRect();
    if (b.width === 0 || b.height === 0 || code.getBoundingClientRect().height === 0) return;
    // The element that scrolls sideways: the code itself or a box around it.
    let scroller = null;
    for (let el = code; el && el !== box.parentElement; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth + 1) { scroller = el; break; }
    }
    // The last visible character of each line, as (text node, offset), top to bottom.
    const ends = [];
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let last = null;
    let lineNo = 1;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.data;
      for (let i = 0; i < text.length; i++) {
        if (text[i] === "\n") { if (last) ends.push({ ...last, lineNo }); last = null; lineNo++; }
        else if (text[i] !== " " && text[i] !== "\t") last = { node, i };
      }
    }
    if (last) ends.push({ ...last, lineNo });
    const shown = scroller || code;
    const view = shown.getBoundingClientRect();
    const clip = { left: view.left + shown.clientLeft, top: view.top + shown.clientTop };
    clip.right = clip.left + shown.clientWidth;
    clip.bottom = clip.top + shown.clientHeight;
    const start = scroller ? scroller.scrollLeft : 0;
    const positions = scroller ? [0, scroller.scrollWidth] : [0];
    const covered = new Set();
    for (const left of positions) {
      if (scroller) scroller.scrollLeft = left;
      const now = button.getBoundingClientRect();
      for (const end of ends) {
        const range = document.createRange();
        range.setStart(end.node, end.i);
        range.setEnd(end.node, end.i + 1);
        const r = range.getBoundingClientRect();
        if (r.top > now.bottom) break; // lines below the button
        const seen = {
          left: Math.max(r.left, clip.left), right: Math.min(r.right, clip.right),
          top: Math.max(r.top, clip.top), bottom: Math.min(r.bottom, clip.bottom),
        };
        if (seen.right > seen.left && overlap(seen, now)) covered.add(end.lineNo);
      }
    }
    if (scroller) scroller.scrollLeft = start;
    if (covered.size) {
      const lines = code.textContent.split("\n");
      found.push({
        n, where: box.className.split(" ")[0] || box.tagName.toLowerCase(),
        lines: [...covered].map((k) => ({ k, text: lines[k - 1].trim().slice(-40) })),
      });
    }
  });
  return found;
}
