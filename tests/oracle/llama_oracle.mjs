// llama_oracle.mjs: llama.cpp (node-llama-cpp 3.22.1, prebuilt CPU v0.5.0) as the reference for
// glint's parity tests. F32 KV cache, no flash attention, 2 threads, so the only differences from
// an exact forward pass are llama.cpp's own activation quantization and summation order.
// Subcommands (ids files: whitespace-separated token ids; one prompt per line where noted):
//   logits   MODEL IDSFILE OUT.f32   all-position logits, dense float32 [n_tok][n_vocab]
//   greedy   MODEL IDSFILE N         N greedy ids after each line of IDSFILE, one line each
//   gaps     MODEL JOBFILE           JOBFILE = JSON [{prefix:[ids], a, b}]; prints JSON
//                                    [{argmax, gap}] with gap = log p(argmax) - log p(b) in nats
//                                    at the position after prefix (teacher forced)
//   tokenize MODEL TEXTFILE          ids of the whole file (no specials parsed), one line
//   batch    MODEL JOBFILE           one model load for many jobs (see runBatch); prints JSON
// Every logits Map from controlledEvaluate is checked to hold the full vocabulary.
import fs from "node:fs";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const THREADS = Number(process.env.GLINT_ORACLE_THREADS ?? 2);

function readIdLines(path) {
    return fs.readFileSync(path, "utf8").split("\n").map((l) => l.trim()).filter((l) => l.length)
        .map((l) => l.split(/\s+/).map((x) => {
            const v = Number(x);
            if (!Number.isInteger(v) || v < 0) throw new Error(`${path}: bad token id '${x}'`);
            return v;
        }));
}

async function openModel(path, maxTokens) {
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.warn });
    const model = await llama.loadModel({ modelPath: path });
    // Whole prompt in one batch (llama.cpp's prompt path), so batchSize covers the longest input.
    const size = Math.max(64, Math.ceil((maxTokens + 8) / 64) * 64);
    const ctx = await model.createContext({
        contextSize: size, batchSize: size, threads: THREADS, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    return { llama, model, ctx, seq: ctx.getSequence() };
}

// Dense copy of one position's logits; the Map must cover every id exactly once.
function denseLogits(map, nVocab, where) {
    if (!(map instanceof Map) || map.size !== nVocab)
        throw new Error(`${where}: logits map has ${map?.size} entries, expected ${nVocab}`);
    const out = new Float32Array(nVocab).fill(NaN);
    for (const [tok, v] of map) out[tok] = v;
    for (let i = 0; i < nVocab; i++)
        if (Number.isNaN(out[i])) throw new Error(`${where}: logit for id ${i} missing`);
    return out;
}

function nVocabOf(m) {
    const n = m.model.fileInsights.tokenizerConfig?.["tokenizer.ggml.tokens"]?.length ??
        m.model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
    if (!n) throw new Error("cannot determine n_vocab from the GGUF metadata");
    return n;
}

// All-position logits for one prompt: [n_tok * n_vocab] float32.
async function promptLogits(m, ids, nVocab) {
    await m.seq.clearHistory();
    const opt = { generateNext: { logits: true } };
    const res = await m.seq.controlledEvaluate(ids.map((t) => [t, opt]));
    const out = new Float32Array(ids.length * nVocab);
    for (let i = 0; i < ids.length; i++)
        out.set(denseLogits(res[i]?.next?.logits, nVocab, `position ${i}`), i * nVocab);
    return out;
}

// Greedy continuation: prompt in one batch, then one token per evaluation (llama.cpp's decode
// path). No end-of-generation stop: the test compares a fixed number of ids on both sides.
async function greedy(m, ids, n) {
    await m.seq.clearHistory();
    const opt = { generateNext: { token: true } };
    let res = await m.seq.controlledEvaluate([...ids.slice(0, -1), [ids.at(-1), opt]]);
    const out = [];
    for (;;) {
        const t = res.at(-1)?.next?.token;
        if (t == null) throw new Error("llama.cpp returned no token");
        out.push(t);
        if (out.length >= n) break;
        res = await m.seq.controlledEvaluate([[t, opt]]);
    }
    return out;
}

// Teacher-forced gap at the position after prefix between llama.cpp's argmax and token b.
// log p(a) - log p(b) = logit(a) - logit(b): the softmax normalizer cancels.
async function gap(m, job, nVocab) {
    await m.seq.clearHistory();
    const p = job.prefix;
    const res = await m.seq.controlledEvaluate([...p.slice(0, -1),
        [p.at(-1), { generateNext: { logits: true } }]]);
    const l = denseLogits(res.at(-1)?.next?.logits, nVocab, "gap job");
    let am = 0;
    for (let i = 1; i < nVocab; i++) if (l[i] > l[am]) am = i;
    return { argmax: am, a: job.a, b: job.b, gap: l[am] - l[job.b], gap_a: l[job.a] - l[job.b] };
}

function tokenize(m, text) {
    return Array.from(m.model.tokenize(text, false));
}

// JOBFILE: {"logits":[{"ids":[..],"out":"file.f32"}], "greedy":[{"ids":[..],"n":32,"ours":[..]}],
//           "tokenize":["text", ...], "gaps":[{"prefix":[..],"a":1,"b":2}]}  ("ours" optional)
// Output: {"n_vocab", "greedy":[[ids]], "splits":[null | {step, argmax, a, b, gap, gap_a}],
//          "tokenize":[[ids]], "gaps":[{...}], "ms":{...}}
async function runBatch(modelPath, job) {
    const lens = [0, ...(job.logits ?? []).map((j) => j.ids.length),
        ...(job.greedy ?? []).map((j) => j.ids.length + j.n),
        ...(job.gaps ?? []).map((j) => j.prefix.length)];
    const m = await openModel(modelPath, Math.max(...lens));
    const nVocab = nVocabOf(m);
    const out = { n_vocab: nVocab, greedy: [], splits: [], tokenize: [], gaps: [], ms: {} };
    let t0 = performance.now();
    for (const j of job.logits ?? []) fs.writeFileSync(j.out, await promptLogits(m, j.ids, nVocab));
    out.ms.logits = Math.round(performance.now() - t0);
    t0 = performance.now();
    for (const j of job.greedy ?? []) out.greedy.push(await greedy(m, j.ids, j.n));
    out.ms.greedy = Math.round(performance.now() - t0);
    // A greedy job with "ours" (glint's continuation): where the two paths first split, at step
    // k, the teacher-forced gap (see gap) on ids + ours[0..k) between llama.cpp's argmax and
    // b = ours[k], with a = llama.cpp's own token; in this model load, where a separate `gaps`
    // run loads the model again (~5 s a type).
    t0 = performance.now();
    for (const [i, j] of (job.greedy ?? []).entries()) {
        if (!j.ours) continue;
        const theirs = out.greedy[i], n = Math.min(theirs.length, j.ours.length);
        let k = 0;
        while (k < n && theirs[k] === j.ours[k]) k++;
        out.splits[i] = k === n ? null : { step: k, ...await gap(m,
            { prefix: [...j.ids, ...j.ours.slice(0, k)], a: theirs[k], b: j.ours[k] }, nVocab) };
    }
    out.ms.splits = Math.round(performance.now() - t0);
    for (const s of job.tokenize ?? []) out.tokenize.push(tokenize(m, s));
    t0 = performance.now();
    for (const j of job.gaps ?? []) out.gaps.push(await gap(m, j, nVocab));
    out.ms.gaps = Math.round(performance.now() - t0);
    return out;
}

async function main() {
    const [cmd, modelPath, arg, arg2] = process.argv.slice(2);
    const usage = "usage: llama_oracle.mjs logits|greedy|gaps|tokenize|batch MODEL FILE [OUT|N]";
    if (!cmd || !modelPath || !arg) throw new Error(usage);
    if (cmd === "logits") {
        if (!arg2) throw new Error(usage);
        const ids = readIdLines(arg).flat();
        await runBatch(modelPath, { logits: [{ ids, out: arg2 }] });
    } else if (cmd === "greedy") {
        const n = Number(arg2);
        if (!Number.isInteger(n) || n < 1) throw new Error(usage);
        const jobs = readIdLines(arg).map((ids) => ({ ids, n }));
        const r = await runBatch(modelPath, { greedy: jobs });
        for (const g of r.greedy) console.log(g.join(" "));
    } else if (cmd === "gaps") {
        const r = await runBatch(modelPath, { gaps: JSON.parse(fs.readFileSync(arg, "utf8")) });
        console.log(JSON.stringify(r.gaps));
    } else if (cmd === "tokenize") {
        const r = await runBatch(modelPath, { tokenize: [fs.readFileSync(arg, "utf8")] });
        console.log(r.tokenize[0].join(" "));
    } else if (cmd === "batch") {
        const job = JSON.parse(fs.readFileSync(arg, "utf8"));
        console.log(JSON.stringify(await runBatch(modelPath, job)));
    } else {
        throw new Error(usage);
    }
}

main().then(() => process.exit(0), (e) => {
    console.error(`llama_oracle: ${e.message}`);
    process.exit(1);
});
