// The article's figures: images, and inline SVG that is not math, an icon or part of
// another SVG; each tagged so that it can be photographed, with the page colour behind it.
() => {
  const { parse, over, background, luminance } = window.__colours;
  const article = document.querySelector(".md-content article");
  if (!article) return [];
  return [...article.querySelectorAll("img, svg")]
    .filter(el => !el.closest("mjx-container, .md-icon, .twemoji, .md-clipboard, button, label")
                  && !(el.tagName.toLowerCase() === "svg" && el.parentElement.closest("svg")))
    .map((el, n) => {
      el.dataset.figureCheck = String(n);
      const r = el.getBoundingClientRect();
      const img = el.tagName === "IMG";
      return {
        n, width: r.width, height: r.height,
        what: img ? (el.getAttribute("src") || "").split("/").pop()
                  : "inline svg" + (el.id ? "#" + el.id : ""),
        background: background(el.parentElement).slice(0, 3),
        broken: img && el.complete && el.naturalWidth === 0,
      };
    })
    .filter(f => f.broken || (f.width >= 80 && f.height >= 60));
}
