// Each Mermaid diagram: drawn into its (forced open) shadow root as an SVG, or not.
() => {
  const diagrams = [...document.querySelectorAll("div.mermaid")].map(div => {
    const root = div.shadowRoot;
    const svg = root && root.querySelector("svg");
    return {
      shadow: !!root,
      svg: !!svg,
      width: svg ? svg.getBoundingClientRect().width : 0,
      error: !!root && /Syntax error/i.test(root.textContent),
    };
  });
  return {
    diagrams,
    unrendered: document.querySelectorAll("pre.mermaid").length,
    // Mermaid leaves its "Syntax error in text" drawing at the end of <body> on failure.
    strayError: /Syntax error/i.test(document.body.innerText),
  };
}
