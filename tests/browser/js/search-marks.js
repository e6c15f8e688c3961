// Each search highlight on the page (Material's <mark data-md-highlight>), with the character
// just before and just after it in its paragraph.
() => [...document.querySelectorAll("mark[data-md-highlight]")].map(mark => {
  const block = mark.closest("p, li, td, th, h1, h2, h3, h4, h5, h6, pre, div") || document.body;
  const range = document.createRange();
  range.setStart(block, 0);
  range.setEndBefore(mark);
  const start = range.toString().length;
  const text = block.textContent;
  return {
    text: mark.textContent,
    before: text.slice(Math.max(0, start - 1), start),
    after: text.slice(start + mark.textContent.length, start + mark.textContent.length + 1),
  };
})
