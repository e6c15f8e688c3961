// Each code block's copy button: there, visible, and aimed at the block's own code.
() => [...document.querySelectorAll(".md-content pre > code")].map((code, n) => {
  const pre = code.parentElement;
  // Material 9.6+: <pre><nav class="md-code__nav"><button data-md-type="copy">;
  // older releases: <pre><button class="md-clipboard">.
  const button = pre.querySelector(
    ':scope > nav > [data-md-type="copy"], :scope > .md-clipboard');
  const selector = button && button.getAttribute("data-clipboard-target");
  const target = selector && document.querySelector(selector);
  return {
    n, lang: pre.parentElement.className, button: !!button,
    visible: !!button && button.checkVisibility(),
    target: selector, same: !!target && target === code,
    text: code.innerText,
  };
})
