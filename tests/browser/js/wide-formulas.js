// The display formulas wider than their box (they scroll sideways), and whether each shows
// it: a scroll shadow (a background that scrolls with the box) and a keyboard tab stop.
() => [...document.querySelectorAll(".md-content div.arithmatex")]
  .filter(el => el.getClientRects().length > 0 && el.scrollWidth > el.clientWidth + 1)
  .map(el => {
    const style = getComputedStyle(el);
    return {
      text: el.textContent.slice(0, 30),
      shadow: /gradient/.test(style.backgroundImage) && /local/.test(style.backgroundAttachment),
      focusable: el.tabIndex >= 0,
    };
  })
