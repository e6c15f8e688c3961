// The guide's char GPT, run in the page: the forward pass of snippets/core/model.py's GPT with
// learned positions and softmax attention, in plain JavaScript. No library, nothing from
// another host. attention-explorer.js loads this file, and the model, only when the reader
// uses its text box (or calls window.attentionGuide.run).
//
// The model is ../live/char-gpt.json (the manifest: sizes, characters, and per tensor its
// name, shape and offset in floats) and ../live/char-gpt.bin (the float32 weights), written
// at build time by hooks/explorer_data.py from lab/recipes/live_model.py. The same weights are the
// checkpoint ../live/char-gpt.pt; tests/pages/test_attention_live.py compares this forward
// pass with PyTorch on it.
//
// Arithmetic is in float64: closer to PyTorch's float32 results than float32 steps in
// another order would be.
(() => {
  "use strict";

  // ----------------------------------------------------------------- the pieces

  // erf, for the exact GELU (nn.GELU's default): a series near 0, a continued fraction
  // for erfc beyond |x| = 3; both to about 1e-15.
  function erf(x) {
    const a = Math.abs(x);
    if (a > 6) return Math.sign(x);
    if (a <= 3) {
      let term = x;
      let sum = x;
      for (let n = 1; n < 80 && Math.abs(term) > 1e-17; n++) {
        term *= (-x * x) / n;
        sum += term / (2 * n + 1);
      }
      return (2 / Math.sqrt(Math.PI)) * sum;
    }
    let f = a; // erfc(a) = exp(-a²) / √π / (a + ½ / (a + 1 / (a + 3/2 / (a + ...))))
    for (let n = 60; n >= 1; n--) f = a + n / 2 / f;
    const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
    return Math.sign(x) * (1 - erfc);
  }

  const gelu = (x) => 0.5 * x * (1 + erf(x / Math.SQRT2));

  // out (T, N) = x (T, K) @ w^T, w (N, K) as nn.Linear holds it, plus bias (N) if given.
  // Four running sums: about twice as fast as one, the loop no longer waits on each add.
  function linear(x, T, K, w, N, bias = null) {
    const out = new Float64Array(T * N);
    const K4 = K - (K % 4);
    for (let t = 0; t < T; t++) {
      const row = t * K;
      for (let n = 0; n < N; n++) {
        const col = n * K;
        let s0 = 0;
        let s1 = 0;
        let s2 = 0;
        let s3 = 0;
        for (let k = 0; k < K4; k += 4) {
          s0 += x[row + k] * w[col + k];
          s1 += x[row + k + 1] * w[col + k + 1];
          s2 += x[row + k + 2] * w[col + k + 2];
          s3 += x[row + k + 3] * w[col + k + 3];
        }
        for (let k = K4; k < K; k++) s0 += x[row + k] * w[col + k];
        out[t * N + n] = (bias ? bias[n] : 0) + (s0 + s1) + (s2 + s3);
      }
    }
    return out;
  }

  // nn.LayerNorm over C channels of each position: biased variance, eps inside the root.
  function layerNorm(x, T, C, weight, bias, eps) {
    const out = new Float64Array(T * C);
    for (let t = 0; t < T; t++) {
      let mean = 0;
      for (let c = 0; c < C; c++) mean += x[t * C + c];
      mean /= C;
      let variance = 0;
      for (let c = 0; c < C; c++) variance += (x[t * C + c] - mean) ** 2;
      const scale = 1 / Math.sqrt(variance / C + eps);
      for (let c = 0; c < C; c++) {
        out[t * C + c] = (x[t * C + c] - mean) * scale * weight[c] + bias[c];
      }
    }
    return out;
  }

  // Causal self-attention of H heads over x (T, C): out (T, C) before proj, and the
  // weights [head][query][key], zero after the query (the causal mask).
  function attention(qkv, T, C, H) {
    const D = C / H;
    const y = new Float64Array(T * C);
    const weights = [];
    const scale = 1 / Math.sqrt(D);
    for (let h = 0; h < H; h++) {
      const rows = [];
      for (let t = 0; t < T; t++) {
        const q = t * 3 * C + h * D; // channels [0, C) queries, [C, 2C) keys, [2C, 3C) values
        const scores = new Float64Array(t + 1);
        let best = -Infinity;
        for (let s = 0; s <= t; s++) {
          const k = s * 3 * C + C + h * D;
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qkv[q + d] * qkv[k + d];
          scores[s] = dot * scale;
          if (scores[s] > best) best = scores[s];
        }
        let total = 0;
        for (let s = 0; s <= t; s++) {
          scores[s] = Math.exp(scores[s] - best);
          total += scores[s];
        }
        const row = new Array(T).fill(0);
        for (let s = 0; s <= t; s++) {
          const w = scores[s] / total;
          row[s] = w;
          const v = s * 3 * C + 2 * C + h * D;
          for (let d = 0; d < D; d++) y[t * C + h * D + d] += w * qkv[v + d];
        }
        rows.push(row);
      }
      weights.push(rows);
    }
    return { y, weights };
  }

  // The next id from next-token logits (V), as snippets/run/generate.py's pick_next: the most
  // likely (the first of equals) at temperature 0; else logits / temperature, then only the
  // top_k most likely (ties stay), softmax, and one draw of random() in [0, 1).
  function pick(logits, { temperature = 0, topK = null } = {}, random = Math.random) {
    if (!(temperature > 0)) {
      let best = 0;
      logits.forEach((z, i) => {
        if (z > logits[best]) best = i;
      });
      return best;
    }
    let scaled = logits.map((z) => z / temperature);
    if (topK !== null && topK < scaled.length) {
      const kth = [...scaled].sort((a, b) => b - a)[topK - 1];
      scaled = scaled.map((z) => (z < kth ? -Infinity : z));
    }
    const top = Math.max(...scaled);
    const p = scaled.map((z) => Math.exp(z - top));
    const total = p.reduce((a, b) => a + b, 0);
    let r = random() * total;
    for (let i = 0; i < p.length; i++) {
      r -= p[i];
      if (r < 0) return i;
    }
    return p.findLastIndex((x) => x > 0); // r ran past the end by rounding
  }

  // Per head, the mean weight from each query but the first to the token before it (as
  // snippets/pages/induction.py's previous_token_scores).
  function previousTokenNotes(weights) {
    return weights.map((heads) =>
      heads.map((rows) => {
        if (rows.length < 2) return "one token: no previous one";
        const score = rows.slice(1).reduce((sum, row, i) => sum + row[i], 0) / (rows.length - 1);
        return `previous token ${score.toFixed(2)}`;
      }),
    );
  }

  function softmax(logits) {
    const top = Math.max(...logits);
    const p = logits.map((z) => Math.exp(z - top));
    const total = p.reduce((a, b) => a + b, 0);
    return p.map((x) => x / total);
  }

  // ----------------------------------------------------------------- the model

  function makeModel(manifest, buffer) {
    const stored = new Float32Array(buffer);
    if (stored.length !== manifest.floats) {
      throw new Error(`the weights hold ${stored.length} floats, the manifest ${manifest.floats}`);
    }
    const floats = Float64Array.from(stored); // once: float64 reads are the faster kind
    const tensors = {};
    for (const { name, shape, offset } of manifest.tensors) {
      const size = shape.reduce((a, b) => a * b, 1);
      tensors[name] = floats.subarray(offset, offset + size);
    }
    const get = (name) => {
      if (!(name in tensors)) throw new Error(`the model has no tensor ${name}`);
      return tensors[name];
    };
    const { chars, vocab_size: V, context_length: T_max, n_embed: C, n_head: H } = manifest;
    const L = manifest.n_layer;
    const eps = manifest.layer_norm_eps;
    const ids = new Map([...chars].map((ch, i) => [ch, i]));

    // One id per character; the characters the model does not know, each once.
    function encode(text) {
      const unknown = [];
      const tokens = [...text];
      for (const ch of tokens) if (!ids.has(ch) && !unknown.includes(ch)) unknown.push(ch);
      return { tokens, ids: tokens.map((ch) => ids.get(ch)), unknown };
    }

    // ids (T <= T_max) -> weights [layer][head][query][key], logits [position][vocab].
    function forward(idx) {
      const T = idx.length;
      if (T < 1 || T > T_max) throw new Error(`${T} tokens: the model reads 1 to ${T_max}`);
      const tok = get("tok_emb.weight");
      const pos = get("pos_emb.weight");
      let x = new Float64Array(T * C);
      idx.forEach((id, t) => {
        for (let c = 0; c < C; c++) x[t * C + c] = tok[id * C + c] + pos[t * C + c];
      });
      const weights = [];
      for (let l = 0; l < L; l++) {
        const p = `blocks.${l}.`;
        const h = layerNorm(x, T, C, get(`${p}ln1.weight`), get(`${p}ln1.bias`), eps);
        const qkv = linear(h, T, C, get(`${p}attn.qkv.weight`), 3 * C);
        const { y, weights: w } = attention(qkv, T, C, H);
        weights.push(w);
        const out = linear(y, T, C, get(`${p}attn.proj.weight`), C, get(`${p}attn.proj.bias`));
        for (let i = 0; i < x.length; i++) x[i] += out[i];
        const h2 = layerNorm(x, T, C, get(`${p}ln2.weight`), get(`${p}ln2.bias`), eps);
        const wide = linear(h2, T, C, get(`${p}mlp.fc.weight`), 4 * C, get(`${p}mlp.fc.bias`));
        for (let i = 0; i < wide.length; i++) wide[i] = gelu(wide[i]);
        const mlp = linear(wide, T, 4 * C, get(`${p}mlp.proj.weight`), C, get(`${p}mlp.proj.bias`));
        for (let i = 0; i < x.length; i++) x[i] += mlp[i];
      }
      const final = layerNorm(x, T, C, get("ln_f.weight"), get("ln_f.bias"), eps);
      const flat = linear(final, T, C, get("lm_head.weight"), V);
      const logits = [];
      for (let t = 0; t < T; t++) logits.push(Array.from(flat.subarray(t * V, (t + 1) * V)));
      return { weights, logits };
    }

    return {
      chars,
      vocabSize: V,
      contextLength: T_max,
      encode,
      forward,
      pick,
      softmax,
      previousTokenNotes,
    };
  }

  async function load(manifestUrl) {
    const response = await fetch(manifestUrl);
    if (!response.ok) throw new Error(`HTTP ${response.status} for ${manifestUrl}`);
    const manifest = await response.json();
    const weightsUrl = new URL(manifest.weights, response.url);
    const weights = await fetch(weightsUrl);
    if (!weights.ok) throw new Error(`HTTP ${weights.status} for ${weightsUrl}`);
    return makeModel(manifest, await weights.arrayBuffer());
  }

  window.attentionGuideRuntime = { load };
})();
