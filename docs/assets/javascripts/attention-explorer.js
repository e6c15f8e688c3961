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
//
// The text box runs the first examples' model, the guide's char GPT, on the reader's text:
// attention-live.js and the model's weights (../live/) load when the box is first used, not
// before. window.attentionGuide.run(text) resolves to {tokens, weights, logits} (weights
// [layer][head][query][key], logits [position][vocab]); window.attentionGuide.checkpoint is
// the checkpoint of the same model (relative to the page), for snippets.run.generate.load_model;
// tests/pages/test_attention_live.py compares the two.
(() => {
  "use strict";

  const SCRIPT = document.currentScript;
  const DATA_URL = new URL("../attention-explorer.json", SCRIPT.src);
  const LIVE_SCRIPT = new URL("attention-live.js", SCRIPT.src);
  const MODEL_URL = new URL("../live/char-gpt.json", SCRIPT.src);
  const CHECKPOINT = SCRIPT.getAttribute("src").replace(
    /javascripts\/attention-explorer\.js$/,
    "live/char-gpt.pt",
  );
  const CONTINUE_TOKENS = 20; // characters the continue button adds

  // Tokens as the reader sees them: a space would be an empty box.
  const shown = (token) => (token === " " ? "␣" : token);
  const spoken = (token) => (token === " " ? "space" : `“${token}”`);

  function element(tag, attributes = {}, text = null) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes)) el.setAttribute(name, value);
    if (text !== null) el.textContent = text;
    return el;
  }

  // ----------------------------------------------------------------- the live model

  let runtime = null; // the promise of the model, once asked for

  function liveModel() {
    if (runtime === null) {
      runtime = new Promise((resolve, reject) => {
        const script = element("script", { src: LIVE_SCRIPT.href });
        script.addEventListener("load", resolve);
        script.addEventListener("error", () => reject(new Error(`${LIVE_SCRIPT} did not load`)));
        document.head.append(script);
      }).then(() => window.attentionGuideRuntime.load(MODEL_URL));
      runtime.catch(() => (runtime = null)); // the next use tries again
    }
    return runtime;
  }

  // The model's ids of text's last contextLength characters; an error naming the others.
  async function encoded(text) {
    if (typeof text !== "string" || text.length === 0) {
      throw new TypeError(`text must be a string of at least one character, got ${text}`);
    }
    const model = await liveModel();
    const { tokens, ids, unknown } = model.encode(text);
    if (unknown.length) {
      const error = new Error(
        `The model does not know ${unknown.map(spoken).join(", ")}: it reads only the ` +
          `${model.vocabSize} characters of the guide’s text, the text it was trained on.`,
      );
      error.unknown = unknown;
      throw error;
    }
    const start = Math.max(0, ids.length - model.contextLength);
    return { model, tokens: tokens.slice(start), ids: ids.slice(start), cropped: start > 0 };
  }

  async function run(text) {
    const { model, tokens, ids } = await encoded(text);
    return { tokens, ...model.forward(ids) };
  }

  // The next n characters after text: greedy at temperature 0, else sampled.
  async function generate(text, n, options = {}) {
    let { model, ids } = await encoded(text);
    let out = "";
    for (let i = 0; i < n; i++) {
      const { logits } = model.forward(ids.slice(-model.contextLength));
      const next = model.pick(logits[logits.length - 1], options);
      ids = [...ids, next];
      out += model.chars[next];
    }
    return out;
  }

  window.attentionGuide = { checkpoint: CHECKPOINT, run, generate };

  // ----------------------------------------------------------------- the attention explorer

  function buildExplorer(root, data, n) {
    // The rows in thousandths become weights; the reader's text gets the same form.
    const examples = data.examples.map((example) => ({
      ...example,
      weights: example.weights.map((heads) =>
        heads.map((rows) => rows.map((row) => row.map((w) => w / 1000))),
      ),
    }));
    root.replaceChildren();
    const id = (name) => `attention-explorer-${n}-${name}`;

    const controls = element("div", { class: "ae-controls" });
    const select = element("select", { id: id("input") });
    examples.forEach((example, i) => select.append(element("option", { value: i }, example.label)));
    select.append(element("option", { value: "live" }, "Your own text (the box below)"));
    controls.append(element("label", { for: id("input") }, "Input"), select);

    const live = element("div", { class: "ae-live" });
    const text = element("input", {
      type: "text",
      id: id("text"),
      class: "ae-text",
      autocomplete: "off",
      spellcheck: "false",
      placeholder: "Type here: the guide’s GPT runs in your browser",
      "aria-describedby": id("live-status"),
    });
    const number = (name, min, step, value) =>
      element("input", { type: "number", id: id(name), min, step, value });
    const temperature = number("temperature", "0", "0.1", "0.8");
    const topK = number("top-k", "1", "1", "10");
    const more = element("button", { type: "button", class: "ae-continue" }, "Continue");
    const sampling = element("div", { class: "ae-sampling" });
    const labelFor = (name, words) => element("label", { for: id(name) }, words);
    sampling.append(labelFor("temperature", "Temperature (0: greedy)"), temperature);
    sampling.append(labelFor("top-k", "Top-k"), topK, more);
    const liveStatus = element(
      "p",
      { class: "ae-live-status", id: id("live-status"), "aria-live": "polite" },
      "Type any text: the first examples’ model reads it in this page (about 0.5 MB loads " +
        "when you start). Continue writes on with the temperature and top-k chosen.",
    );
    live.append(element("label", { for: id("text") }, "Your text"), text, sampling, liveStatus);
    const help = element(
      "p",
      { class: "ae-help", id: id("help") },
      "Hover, tap or focus a token to make it the query; ← and → move between tokens, " +
        "Home and End jump to the first and last.",
    );
    const scroller = element("div", { class: "ae-scroll" });
    const next = element("div", { class: "ae-next" });
    const notes = element("p", { class: "ae-notes" });
    const status = element("p", { class: "ae-status", "aria-live": "polite" });
    root.append(controls, live, help, scroller, next, notes, status);

    let example = null;
    let yours = null; // the reader's text, once run
    let query = 0;
    let tokenButtons = [];
    let headRows = [];

    // The grid is made once and kept: a new input (each keystroke in the text box) adds or
    // removes only the tokens and cells its length needs, and the browser restyles only those.
    const grid = element("div", { class: "ae-grid" });
    const tokenRow = element("div", {
      class: "ae-row ae-row--tokens",
      role: "toolbar",
      "aria-label": "Query token",
      "aria-describedby": id("help"),
    });
    tokenRow.append(element("span", { class: "ae-label", "aria-hidden": "true" }, "query"));
    tokenRow.addEventListener("keydown", onKey);
    grid.append(tokenRow);
    scroller.append(grid);

    function tokenButton(t) {
      const attributes = { type: "button", class: "ae-token", "data-position": t, tabindex: "-1" };
      const button = element("button", attributes);
      button.addEventListener("pointerenter", () => select_(t));
      button.addEventListener("click", () => select_(t));
      button.addEventListener("focus", () => select_(t));
      return button;
    }

    // Keep the first n of items, making the others with make(i) and appending them (or,
    // for a head, its row) to parent.
    function resize(items, n, parent, make) {
      while (items.length > n) items.pop().remove();
      while (items.length < n) {
        const item = (items[items.length] = make(items.length));
        parent.append(item.row ?? item);
      }
    }

    function render() {
      example = select.value === "live" ? yours : examples[Number(select.value)];
      const T = example.tokens.length;
      grid.style.setProperty("--ae-columns", T);
      resize(tokenButtons, T, tokenRow, tokenButton);
      example.tokens.forEach((token, t) => {
        const button = tokenButtons[t];
        if (button.textContent !== shown(token)) button.textContent = shown(token);
        button.setAttribute("aria-label", `token ${t + 1} of ${T}: ${spoken(token)}`);
      });
      const heads = example.weights.flatMap((layerHeads, layer) =>
        layerHeads.map((rows, head) => ({ layer, head, rows })),
      );
      resize(headRows, heads.length, grid, (i) => {
        const { layer, head } = heads[i];
        const name = `L${layer + 1} H${head + 1}`;
        const row = element("div", {
          class: "ae-row ae-row--head",
          role: "img",
          "data-layer": layer,
          "data-head": head,
        });
        const label = element("span", { class: "ae-label", "aria-hidden": "true" }, name);
        row.append(label);
        return { layer, head, name, row, label, cells: [], remove: () => row.remove() };
      });
      headRows.forEach((headRow, i) => {
        const { layer, head } = headRow;
        headRow.rows = heads[i].rows;
        headRow.label.title = `layer ${layer + 1}, head ${head + 1}: ${example.notes[layer][head]}`;
        const cell = (s) => element("span", { class: "ae-cell", "data-key": s });
        resize(headRow.cells, T, headRow.row, cell);
      });
      notes.textContent =
        "Head scores on this input: " +
        heads.map(({ layer, head }) => `L${layer + 1} H${head + 1} ${example.notes[layer][head]}`)
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
      // token, when an input opens), without scrolling the page itself; measured in the next
      // frame's layout, not in a layout of the whole page forced now.
      const button = tokenButtons[t];
      requestAnimationFrame(() => {
        if (!button.isConnected) return; // redrawn since
        const box = scroller.getBoundingClientRect();
        const at = button.getBoundingClientRect();
        if (at.left < box.left || at.right > box.right) {
          scroller.scrollLeft += at.left - box.left - (box.width - at.width) / 2;
        }
      });
      const token = example.tokens[t];
      const strongest = [];
      for (const { name, rows, row, cells } of headRows) {
        const weights = rows[t]; // keys 0..t (the reader's text: zeros after them)
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
      showNext(t);
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

    // The model's next-token distribution after query t: its five most likely characters.
    function showNext(t) {
      next.replaceChildren();
      if (!example.model) return; // an exported example: no logits
      const { chars, softmax } = example.model;
      const p = softmax(example.logits[t]);
      const top = p.map((x, i) => [x, i]).sort((a, b) => b[0] - a[0]).slice(0, 5);
      const after = `next after ${shown(example.tokens[t])}:`;
      next.append(element("span", { class: "ae-label" }, after));
      for (const [x, i] of top) {
        const item = element("span", { class: "ae-next-item", "data-p": String(x) });
        item.style.setProperty("--p", x);
        const token = element("span", { class: "ae-next-token" }, shown(chars[i]));
        item.append(token, ` ${x.toFixed(2)}`);
        item.title = `${spoken(chars[i])}: probability ${x.toFixed(3)}`;
        next.append(item);
      }
    }

    // An input opens on its last token: the one that may look at all the others.
    const open = () => {
      if (select.value === "live" && yours === null) {
        text.focus();
        return;
      }
      query = Infinity;
      render();
    };
    select.addEventListener("change", open);

    let asked = 0; // the latest text run: an older result arriving late is dropped
    async function update() {
      const mine = ++asked;
      if (!text.value) {
        liveStatus.textContent = "Type at least one character.";
        return;
      }
      if (runtime === null) liveStatus.textContent = "Loading the model…";
      try {
        const { model, tokens, ids, cropped } = await encoded(text.value);
        if (mine !== asked) return;
        const { weights, logits } = model.forward(ids);
        yours = { tokens, weights, logits, model, notes: model.previousTokenNotes(weights) };
        liveStatus.textContent = cropped
          ? `The model reads at most ${model.contextLength} characters: shown are the last ` +
            `${tokens.length}.`
          : `${tokens.length} character${tokens.length === 1 ? "" : "s"}, run in this page.`;
        select.value = "live";
        query = Infinity;
        render();
        root.dataset.live = String(mine);
      } catch (error) {
        if (mine === asked) said(error);
      }
    }
    // Unknown characters are the reader's to fix; anything else is a fault of the page.
    function said(error) {
      liveStatus.textContent = error.unknown ? error.message : `The model failed: ${error.message}`;
      if (!error.unknown) console.error("attention explorer:", error);
    }
    text.addEventListener("focus", () => liveModel().catch(() => {}), { once: true });
    text.addEventListener("input", update);

    // Sampling options as snippets/run/generate.py checks them: a clear word for a bad value.
    function options() {
      const t = Number(temperature.value);
      if (temperature.value === "" || !(t >= 0)) {
        throw new Error(`temperature (${temperature.value}) must be 0 (greedy) or more`);
      }
      const k = topK.value === "" ? null : Number(topK.value);
      if (k !== null && !(Number.isInteger(k) && k >= 1)) {
        throw new Error(`top-k (${topK.value}) must be a whole number of at least 1, or empty`);
      }
      return { temperature: t, topK: k };
    }

    more.addEventListener("click", async () => {
      if (!text.value) {
        liveStatus.textContent = "Type a few characters first: continue writes on from them.";
        return;
      }
      let chosen;
      try {
        chosen = options();
      } catch (error) {
        liveStatus.textContent = error.message;
        return;
      }
      more.disabled = true;
      try {
        for (let i = 0; i < CONTINUE_TOKENS; i++) {
          text.value += await generate(text.value, 1, chosen);
          await update();
          await new Promise((resolve) => setTimeout(resolve, 0)); // let the page draw
        }
      } catch (error) {
        said(error);
      } finally {
        more.disabled = false;
      }
    });

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
