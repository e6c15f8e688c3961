// At the current width: how wide the page is against its window (a wider page scrolls
// sideways), and the first elements that stick out on the right while no box of theirs
// scrolls or clips them.
() => {
  const width = document.documentElement.clientWidth;
  const scroll = document.documentElement.scrollWidth;
  const held = (el) => {
    for (let e = el.parentElement; e && e !== document.body; e = e.parentElement) {
      if (/auto|scroll|hidden|clip/.test(getComputedStyle(e).overflowX)) return true;
    }
    return false;
  };
  const culprits = [];
  if (scroll > width) {
    for (const el of document.querySelectorAll("body *")) {
      const r = el.getBoundingClientRect();
      if (r.width > 0 && r.right > width + 1 && !held(el)) {
        const name = el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
          ? "." + el.className.trim().split(/\s+/).join(".") : "");
        culprits.push(`${name} (right edge at ${Math.round(r.right)} px)`);
        if (culprits.length >= 3) break;
      }
    }
  }
  return { width, scroll, culprits };
}
