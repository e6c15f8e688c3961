// axe-core on the page; each violation with its elements, and which allowance (a rule id
// and a CSS selector) an element matches, if any.
async ([options, allow]) => {
  const result = await axe.run(document, options);
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.map(n => ({
      target: n.target.join(" "),
      html: n.html.replace(/\s+/g, " ").slice(0, 120),
      // the first allowance (rule id, selector) that this element matches, or -1
      allowed: allow.findIndex(([rule, selector]) => rule === v.id && n.element.matches(selector)),
    })),
  }));
}
