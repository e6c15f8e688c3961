// The contrast of highlighted code (each token's colour on the code block's background, as
// WCAG counts it), once per distinct pair of colours: a page's thousands of tokens share a
// handful. axe's color-contrast rule leaves these spans (checks.CODE_TOKENS) to this check.
(tokens) => {
  const { parse, over, background, ratio } = window.__colours;
  const pairs = new Map();
  for (const el of document.querySelectorAll(tokens)) {
    // Its own text, punctuation and symbols left out as axe leaves them out; and shown.
    const own = [...el.childNodes].some(
      n => n.nodeType === Node.TEXT_NODE && n.data.replace(/[\p{P}\p{S}\s]/gu, ""));
    if (!own || el.getClientRects().length === 0) continue;
    const bg = background(el);
    const fg = over(parse(getComputedStyle(el).color), bg);
    const key = `${fg} on ${bg}`;
    if (pairs.has(key)) { pairs.get(key).count += 1; continue; }
    pairs.set(key, {ratio: ratio(fg, bg), count: 1, token: el.className,
                    text: el.textContent.slice(0, 30), color: getComputedStyle(el).color});
  }
  return {scheme: document.body.getAttribute("data-md-color-scheme"), pairs: [...pairs.values()]};
}
