// SPDX-License-Identifier: MIT
// Loads glint make-model GGUFs in llama.cpp (node-llama-cpp 3.22.1) and reports, as one JSON
// line per model: the ids of a fixed text, and logit statistics over a 20-token prompt (longer
// than the tiny model's 8-token window): the spread of the logits before the soft-cap, the top-1
// probability, greedy-continuation variety, and the correlation of every model's logits with
// the first model's (same seed: quantized files must track the F32 one).
//   node writer_check.mjs logits SOFTCAP MODEL[:MIN_CORR]...   (first MODEL is the reference)
// Exits 1 if a model's logits are unhealthy (near-uniform, one-hot, a stuck greedy loop) or
// correlate with the reference's below MIN_CORR.
//   node writer_check.mjs vocab MODEL TEXT          (vocab-only load: prints the ids of TEXT)
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const [mode, ...args] = process.argv.slice(2);
const TEXT = "Hello, world!";
const PROMPT = "The quick brown fox jumps over the lazy dog, then runs far away into the dark forest.";

function stats(dense, cap) {
    // Undo cap * tanh(x / cap) to see the model's own spread.
    let s = 0, s2 = 0, max = -Infinity;
    const n = dense.length;
    for (let i = 0; i < n; i++) {
        const l = dense[i];
        const x = cap > 0 ? cap * Math.atanh(Math.max(-0.999999, Math.min(0.999999, l / cap))) : l;
        s += x; s2 += x * x;
        if (l > max) max = l;
    }
    let z = 0;
    for (let i = 0; i < n; i++) z += Math.exp(dense[i] - max);
    const mean = s / n;
    return { std: Math.sqrt(s2 / n - mean * mean), p1: 1 / z };
}

function argmax(d) {
    let best = 0;
    for (let i = 1; i < d.length; i++) if (d[i] > d[best]) best = i;
    return best;
}

function corr(a, b) {
    let sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    const n = a.length;
    for (let i = 0; i < n; i++) { sa += a[i]; sb += b[i]; saa += a[i] * a[i]; sbb += b[i] * b[i]; sab += a[i] * b[i]; }
    const cov = sab / n - (sa / n) * (sb / n);
    return cov / Math.sqrt((saa / n - (sa / n) ** 2) * (sbb / n - (sb / n) ** 2));
}

async function evalModel(path, cap) {
    const model = await llama.loadModel({ modelPath: path });
    const nVocab = model.tokens.nTokens ?? 202048;
    const ids = model.tokenize(TEXT);
    const ctx = await model.createContext({ contextSize: 256, threads: 2, batchSize: 64 });
    const seq = ctx.getSequence();
    const prompt = model.tokenize(PROMPT);
    const res = await seq.controlledEvaluate(prompt.map((t) => [t, { generateNext: { logits: true } }]));
    const dense = res.map((r) => {
        const d = new Float32Array(nVocab).fill(-1e30);
        for (const [tok, v] of r.next.logits) d[tok] = v;
        return d;
    });
    const per = dense.map((d) => stats(d, cap));
    // Greedy continuation from the end of the prompt.
    const first = [...res.at(-1).next.logits.entries()][0][0];
    const greedy = [first];
    for await (const t of seq.evaluate([first], { temperature: 0 })) {
        greedy.push(t);
        if (greedy.length >= 24) break;
    }
    let run = 1, maxRun = 1;
    for (let i = 1; i < greedy.length; i++) { run = greedy[i] === greedy[i - 1] ? run + 1 : 1; maxRun = Math.max(maxRun, run); }
    await ctx.dispose();
    await model.dispose();
    const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
    return {
        dense,
        out: {
            model: path, n_vocab: nVocab, ids: [...ids], n_prompt: prompt.length,
            std_median: med(per.map((p) => p.std)), std_min: Math.min(...per.map((p) => p.std)),
            p1_median: med(per.map((p) => p.p1)), p1_max: Math.max(...per.map((p) => p.p1)),
            argmax_distinct: new Set(dense.map(argmax)).size,
            greedy_distinct: new Set(greedy).size, greedy_max_run: maxRun, greedy,
        },
    };
}

// Healthy = what a language model's logits look like: spread (std 1.5..6 before the cap), a top-1
// well above uniform (1/202048) but not certain, and greedy text that moves on.
function judge(o, minCorr) {
    const bad = [];
    if (!(o.std_median >= 1.5 && o.std_median <= 6)) bad.push(`logit std ${o.std_median}`);
    if (!(o.p1_median > 1e-3)) bad.push(`top-1 probability ${o.p1_median}: near-uniform`);
    if (!(o.p1_max < 0.9)) bad.push(`top-1 probability ${o.p1_max}: one-hot`);
    if (o.greedy_distinct < 8 || o.greedy_max_run > 3)
        bad.push(`greedy stuck: ${o.greedy_distinct} distinct, run ${o.greedy_max_run}`);
    if (o.argmax_distinct < o.n_prompt / 3) bad.push(`${o.argmax_distinct} distinct argmaxes`);
    if (!(o.corr_min >= minCorr)) bad.push(`correlation with the reference ${o.corr_min} < ${minCorr}`);
    return bad;
}

if (mode === "logits") {
    const cap = parseFloat(args[0]);
    let ref = null, failed = 0;
    for (const arg of args.slice(1)) {
        const m = /^(.*?)(?::([0-9.]+))?$/.exec(arg);
        const { dense, out } = await evalModel(m[1], cap);
        if (!ref) ref = dense;
        const cs = dense.map((d, i) => corr(d, ref[i]));
        out.corr_min = Math.min(...cs);
        out.argmax_agree = dense.filter((d, i) => argmax(d) === argmax(ref[i])).length;
        const bad = judge(out, m[2] ? parseFloat(m[2]) : 0);
        out.ok = bad.length === 0;
        console.log(JSON.stringify(out));
        if (bad.length) { failed++; console.error(`FAIL ${m[1]}: ${bad.join("; ")}`); }
    }
    process.exit(failed ? 1 : 0);
} else if (mode === "vocab") {
    const model = await llama.loadModel({ modelPath: args[0], vocabOnly: true });
    console.log(JSON.stringify({ model: args[0], ids: [...model.tokenize(args[1])] }));
    await model.dispose();
} else {
    console.error("usage: node writer_check.mjs logits SOFTCAP MODEL... | vocab MODEL TEXT");
    process.exit(2);
}
