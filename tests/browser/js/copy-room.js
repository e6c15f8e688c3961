// At the current width: code lines whose end the copy button covers. A line's end is its
// last character other than a space; where the block shows it (inside the box that scrolls)
// level with the button, it must end left of the button: a line that runs under the button
// and out past it (into the few px between the button and the edge) is covered too, its
// last letter visible and the ones before it not. Each block is looked at as scrolled to
// its start and to its end (a long line's end is seen only there). Material's blocks (pre > code, the button in the <pre>) and the notebook's cells
// (the button beside the highlighted <pre>); blocks not drawn (in a closed <details>) are
// left out. Only the lines level with the button are measured: it sits at the block's top.
() => {
  const blocks = [];
  document.querySelectorAll(".md-content pre > code").forEach((code) => {
    const button = code.parentElement.querySelector(
      ':scope > nav > [data-md-type="copy"], :scope > .md-clipboard');
    if (button) blocks.push({ code, button, frame: code.parentElement, kind: "code block" });
  });
  document.querySelectorAll(".md-content .jp-InputArea-editor").forEach((editor) => {
    const code = editor.querySelector(".highlight-ipynb pre, .highlight pre");
    const button = editor.querySelector("clipboard-copy, .zeroclipboard-container");
    if (code && button) blocks.push({ code, button, frame: editor, kind: "notebook cell" });
  });
  const level = (a, b) => Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  const range = document.createRange();
  const charBox = ([node, i]) => {
    range.setStart(node, i);
    range.setEnd(node, i + 1);
    return range.getBoundingClientRect();
  };
  // Each line's last character other than a space, top to bottom: [text node, offset, line].
  function* lineEnds(code) {
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    let last = null;
    let lineNo = 1;
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.data;
      for (let from = 0; ;) {
        const nl = text.indexOf("\n", from);
        const stop = nl === -1 ? text.length : nl;
        for (let i = stop - 1; i >= from; i--) {
          if (text[i] !== " " && text[i] !== "\t") { last = [node, i]; break; }
        }
        if (nl === -1) break;
        if (last) yield [...last, lineNo];
        last = null;
        lineNo++;
        from = nl + 1;
      }
    }
    if (last) yield [...last, lineNo];
  }
  const found = [];
  const count = {};
  blocks.forEach(({ code, button, frame, kind }) => {
    const n = (count[kind] = (count[kind] ?? -1) + 1); // from 0, as copy-state.js counts
    const b = button.getBoundingClientRect();
    if (b.width === 0 || b.height === 0 || code.getBoundingClientRect().height === 0) return;
    // The element that scrolls sideways (the code itself or a box around it), and the part
    // of the screen it shows: its padding box (its content is clipped there).
    let scroller = null;
    for (let el = code; el && el !== frame.parentElement; el = el.parentElement) {
      if (el.scrollWidth > el.clientWidth + 1) { scroller = el; break; }
    }
    const shown = scroller || code;
    const view = shown.getBoundingClientRect();
    const clip = { left: view.left + shown.clientLeft, top: view.top + shown.clientTop };
    clip.right = clip.left + shown.clientWidth;
    clip.bottom = clip.top + shown.clientHeight;
    const ends = []; // [line, box] of those level with the button (a sideways scroll moves
    for (const end of lineEnds(code)) { // none up or down)
      const at = charBox(end);
      if (at.top > b.bottom) break;
      ends.push([end[2], at]);
    }
    // Scrolled by x px from where it is now, a character moves x px left and the button
    // stays: each position is worked out from one measurement, no scrolling (a scroll
    // followed by a measurement makes the browser lay the page out again).
    const now = scroller ? scroller.scrollLeft : 0;
    const covered = new Set();
    for (const left of scroller ? [0, scroller.scrollWidth - scroller.clientWidth] : [0]) {
      for (const [lineNo, at] of ends) {
        const x = left - now;
        const seen = {
          left: Math.max(at.left - x, clip.left), right: Math.min(at.right - x, clip.right),
          top: Math.max(at.top, clip.top), bottom: Math.min(at.bottom, clip.bottom),
        };
        if (seen.right > seen.left && level(seen, b) && seen.right > b.left + 0.5) {
          covered.add(lineNo);
        }
      }
    }
    if (covered.size) {
      const text = code.textContent.split("\n");
      found.push({
        n, kind,
        lines: [...covered].map((k) => ({ k, text: text[k - 1].trim().slice(-40) })),
      });
    }
  });
  return found;
}
