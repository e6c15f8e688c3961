// The attention explorer and the mask figure of the attention page. No library, nothing
// from another host: the weights are ../attention-explorer.json, written at build time by
// hooks/explorer_data.py from lab/see_attention.py (see explorer_data() there).
//
// JSON: {examples: [{id, label, tokens, weights, notes}], masks: {tokens, causal, padding,
// both}}, where weights[layer][head][query] holds that query's first query + 1 weights in
// thousandths (the later keys are masked: exactly 0) and notes[layer][head] describes
// each head.
//
// Each head row's cell for key s carries the weight as data-weight and as the custom
// property --w, which its colour is mixed from; tests/pages/test_attention_explorer.py checks both against
// the JSON in a real browser.
(() => {
  "use strict";

  const DATA_URL = new URL("../attention-explorer.json", document.currentScript.src);

  // Tokens as the reader sees them: a space would be an empty box.
  const shown = (token) => (token === " " ? "␣" : token);
  const spoken = (token) => (token === " " ? "space" : `“${token}”`);

  function element(tag, attributes = {}, text = null) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
    if (text !== null) el.textContent = text;
    return el;
  }

  // ----------------------------------------------------------------- the attention explorer

  function buildExplorer(root, data, n) {
    const examples = data.examples;
    root.replaceChildren();
    const id = (name) => `attention-explorer-${n}-${name}`;

    const controls = element("div", { class: "ae-controls" });
    const select = element("select", { id: id("input") });
    examples.forEach((example, i) => select.append(element("option", { value: i }, example.label)));
    controls.append(element("label", { for: id("input") }, "Input"), select);
    const help = element(
      "p",
      { class: "ae-help", id: id("help") },
      "Hover, tap or focus a token to make it the query; ← and → move between tokens, " +
        "Home and End jump to the first and last.",
    );
    const scroller = element("div", { class: "ae-scroll" });
    const notes = element("p", { class: "ae-notes" });
    const status = element("p", { class: "ae-status", "aria-live": "polite" });
    root.append(controls, help, scroller, notes, status);

    let example = null;
    let query = 0;
    let tokenButtons = [];
    let headRows = [];

    function render() {
      example = examples[Number(select.value)];
      const T = example.tokens.length;
      const grid = element("div", { class: "ae-grid" });
      grid.style.setProperty("--ae-columns", T);

      const tokenRow = element("div", {
        class: "ae-row ae-row--tokens",
        role: "toolbar",
        "aria-label": "Query token",
        "aria-describedby": id("help"),
      });
      tokenRow.append(element("span", { class: "ae-label", "aria-hidden": "true" }, "query"));
      tokenButtons = example.tokens.map((token, t) => {
        const button = element(
          "button",
          {
            type: "button",
            class: "ae-token",
            "data-position": t,
            "aria-pressed": "false",
            "aria-label": `token ${t + 1} of ${T}: ${spoken(token)}`,
            tabindex: "-1",
          },
          shown(token),
        );
        button.addEventListener("pointerenter", () => select_(t));
        button.addEventListener("click", () => select_(t));
        button.addEventListener("focus", () => select_(t));
        tokenRow.append(button);
        return button;
      });
      tokenRow.addEventListener("keydown", onKey);
      grid.append(tokenRow);

      headRows = [];
      example.weights.forEach((heads, layer) => {
        heads.forEach((rows, head) => {
          const name = `L${layer + 1} H${head + 1}`;
          const row = element("div", {
            class: "ae-row ae-row--head",
            role: "img",
            "data-layer": layer,
            "data-head": head,
          });
          const label = element("span", { class: "ae-label", "aria-hidden": "true" }, name);
          label.title = `layer ${layer + 1}, head ${head + 1}: ${example.notes[layer][head]}`;
          row.append(label);
          const cells = example.tokens.map((_, s) => {
            const cell = element("span", { class: "ae-cell", "data-key": s });
            row.append(cell);
            return cell;
          });
          grid.append(row);
          headRows.push({ layer, head, name, rows, row, cells });
        });
      });
      scroller.replaceChildren(grid);
      notes.textContent =
        "Head scores on this input: " +
        example.weights
          .flatMap((heads, layer) =>
            heads.map((_, head) => `L${layer + 1} H${head + 1} ${example.notes[layer][head]}`),
          )
          .join("; ") +
        ".";
      select_(Math.min(query, T - 1), false);
    }

    function select_(t, announce = true) {
      query = t;
      tokenButtons.forEach((button, i) => {
        button.setAttribute("aria-pressed", String(i === t));
        button.tabIndex = i === t ? 0 : -1;
      });
      // On a narrow screen the tokens scroll sideways: bring the query into view (the last
      // token, when an input opens), without scrolling the page itself.
      const box = scroller.getBoundingClientRect();
      const at = tokenButtons[t].getBoundingClientRect();
      if (at.left < box.left || at.right > box.right) {
        scroller.scrollLeft += at.left - box.left - (box.width - at.width) / 2;
      }
      const token = example.tokens[t];
      const strongest = [];
      for (const { name, rows, row, cells } of headRows) {
        const weights = rows[t].map((w) => w / 1000); // t + 1 weights: keys 0..t
        let best = 0;
        cells.forEach((cell, s) => {
          if (s <= t) {
            cell.classList.remove("ae-cell--masked");
            cell.dataset.weight = String(weights[s]);
            cell.style.setProperty("--w", weights[s]);
            cell.title = `${spoken(example.tokens[s])} (${s + 1}): ${weights[s].toFixed(3)}`;
            if (weights[s] > weights[best]) best = s;
          } else {
            cell.classList.add("ae-cell--masked");
            delete cell.dataset.weight;
            cell.style.removeProperty("--w");
            cell.title = "masked: a later token";
          }
        });
        const weight = weights[best].toFixed(2);
        row.setAttribute(
          "aria-label",
          `${name}: from ${spoken(token)}, most weight on ${spoken(example.tokens[best])} ` +
            `(token ${best + 1}), ${weight}`,
        );
        strongest.push(`${name} → ${spoken(example.tokens[best])} (${best + 1}) ${weight}`);
      }
      if (announce) {
        status.textContent =
          `Query ${spoken(token)}, token ${t + 1}. Most weight: ${strongest.join(", ")}.`;
      }
    }

    function onKey(event) {
      const T = tokenButtons.length;
      const moves = { ArrowLeft: query - 1, ArrowRight: query + 1, Home: 0, End: T - 1 };
      if (!(event.key in moves)) return;
      event.preventDefault();
      const t = Math.max(0, Math.min(T - 1, moves[event.key]));
      tokenButtons[t].focus(); // focus selects it
    }

    // An input opens on its last token: the one that may look at all the others.
    const open = () => {
      query = Infinity;
      render();
    };
    select.addEventListener("change", open);
    open();
    root.dataset.ready = "true";
  }

  // ----------------------------------------------------------------- the mask figure

  const MASKS = [
    ["causal", "Causal", "Each query sees itself and the keys before it: the lower triangle."],
    ["padding", "Padding", "No query may see the two padding keys, whatever its position."],
    [
      "both",
      "Both",
      "Causal and padding combined: real tokens see only real tokens up to themselves. " +
        "A padding query would see nothing, a row of −∞ that softmax turns into NaN, so it " +
        "keeps its own position (the diagonal); its output is never used.",
    ],
  ];

  function buildMasks(root, masks, n) {
    root.replaceChildren();
    const tokens = masks.tokens;
    const buttons = element("div", { class: "me-buttons", role: "group", "aria-label": "Mask" });
    const table = element("table", { class: "me-grid" });
    const caption = element("p", { class: "me-caption", "aria-live": "polite" });
    root.append(buttons, table, caption);

    const head = element("tr");
    head.append(element("td", { class: "me-corner" }, "query \\ key"));
    tokens.forEach((token) => head.append(element("th", { scope: "col" }, token)));
    table.append(head);
    const cells = tokens.map((token) => {
      const tr = element("tr");
      tr.append(element("th", { scope: "row" }, token));
      const row = tokens.map(() => {
        const td = element("td");
        tr.append(td);
        return td;
      });
      table.append(tr);
      return row;
    });

    function show(name) {
      const [, , text] = MASKS.find(([key]) => key === name);
      for (const button of buttons.children) {
        button.setAttribute("aria-pressed", String(button.dataset.mask === name));
      }
      masks[name].forEach((allowed, q) =>
        allowed.forEach((a, k) => {
          const td = cells[q][k];
          td.dataset.allowed = String(a);
          td.setAttribute(
            "aria-label",
            `${tokens[q]} ${a ? "may attend to" : "is masked from"} ${tokens[k]}`,
          );
        }),
      );
      root.dataset.mask = name;
      caption.textContent = text;
    }

    for (const [name, label] of MASKS) {
      const button = element("button", { type: "button", "data-mask": name }, label);
      button.addEventListener("click", () => show(name));
      buttons.append(button);
    }
    show("causal");
    root.dataset.ready = "true";
  }

  // ----------------------------------------------------------------- start

  function fail(roots, error) {
    for (const root of roots) {
      root.replaceChildren(
        element("p", { class: "ae-error" }, `The explorer's data could not be loaded (${error}).`),
      );
    }
    console.error("attention explorer:", error);
  }

  function start() {
    const explorers = [...document.querySelectorAll(".attention-explorer")];
    const maskFigures = [...document.querySelectorAll(".mask-explorer")];
    if (!explorers.length && !maskFigures.length) return;
    fetch(DATA_URL)
      .then((response) => {
        if (!response.ok) throw new Error(`HTTP ${response.status} for ${DATA_URL}`);
        return response.json();
      })
      .then((data) => {
        explorers.forEach((root, n) => buildExplorer(root, data, n));
        maskFigures.forEach((root, n) => buildMasks(root, data.masks, n));
      })
      .catch((error) => fail([...explorers, ...maskFigures], error));
  }

  start();
})();
