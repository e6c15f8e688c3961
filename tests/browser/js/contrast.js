// The contrast of every visible formula's colour with the page colour behind it (WCAG).
() => {
  const { parse, over, background, ratio } = window.__colours;
  const ratios = [...document.querySelectorAll(".md-content mjx-container")]
    .filter(el => el.getClientRects().length > 0)
    .map(el => {
      const bg = background(el);
      const fg = over(parse(getComputedStyle(el).color), bg);
      return {ratio: ratio(fg, bg), text: el.textContent.slice(0, 30),
              color: getComputedStyle(el).color};
    });
  return {scheme: document.body.getAttribute("data-md-color-scheme"), ratios};
}
