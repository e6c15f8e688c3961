// Each drawn Mermaid diagram, in page order: whether a box was kept for it, its natural size
// (the viewBox of its SVG), and the heights of the box and of the drawing.
() => [...document.querySelectorAll(".md-content div.mermaid")].map(div => {
  const svg = div.shadowRoot && div.shadowRoot.querySelector("svg");
  const box = div.parentElement.classList.contains("diagram-box") ? div.parentElement : null;
  const view = svg && svg.viewBox && svg.viewBox.baseVal;
  return {
    boxed: !!box,
    natural: view ? [view.width, view.height] : null,
    boxHeight: box ? box.getBoundingClientRect().height : null,
    drawnHeight: svg ? svg.getBoundingClientRect().height : null,
  };
})
