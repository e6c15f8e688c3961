// Search highlights on whole words only. After a reader follows a search result, Material
// marks the query's terms on the page (search.highlight), but its pattern matches a term
// anywhere in a word: "rope" is marked inside "property". Each mark that is not a whole word
// (a letter or digit right before or after it) is put back as plain text.
(() => {
  const word = /[\p{L}\p{N}_]/u;
  const textAround = (mark, forward) => {
    let node = mark;
    while (node) {
      const next = forward ? node.nextSibling : node.previousSibling;
      if (next) {
        const text = next.textContent;
        if (text.length) return forward ? text[0] : text[text.length - 1];
        node = next;
      } else {
        node = node.parentElement;
        if (!node || node.matches("p, li, td, th, h1, h2, h3, h4, h5, h6, div, pre")) {
          return "";
        }
      }
    }
    return "";
  };
  const unwrapPartial = (root) => {
    for (const mark of root.querySelectorAll("mark[data-md-highlight]")) {
      if (word.test(textAround(mark, false)) || word.test(textAround(mark, true))) {
        mark.replaceWith(document.createTextNode(mark.textContent));
      }
    }
    root.normalize();
  };
  const watch = new MutationObserver((records) => {
    if (records.some((r) => [...r.addedNodes].some((n) =>
      n.nodeType === 1 && (n.matches("mark[data-md-highlight]") ||
                           n.querySelector("mark[data-md-highlight]"))))) {
      unwrapPartial(document.body);
    }
  });
  watch.observe(document.body, { childList: true, subtree: true });
  unwrapPartial(document.body);
})();
