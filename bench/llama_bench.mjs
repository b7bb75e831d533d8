// llama_bench.mjs: llama.cpp's speed on a GGUF through node-llama-cpp 3.22.1 (prebuilt CPU
// v0.5.0), measured the way llama-bench and `glint bench` do: ppP = one P-token batch of random
// ids into an empty context, tgN = N single-token evaluations (no sampling), each repeated R
// times after one warm-up. Prints llama-bench-style JSON like `glint bench --json`.
// node-llama-cpp is resolved from ../tests/oracle/node_modules (where `make test` installs it).
// usage: node bench/llama_bench.mjs MODEL [-p 512] [-n 128] [-t 2] [-r 3]
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "../tests/oracle/package.json"));
const nlcUrl = pathToFileURL(require.resolve("node-llama-cpp")).href;
const { getLlama, LlamaLogLevel } = await import(nlcUrl);

function parseArgs(argv) {
    const o = { model: null, p: 512, n: 128, t: 2, r: 3 };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (["-p", "-n", "-t", "-r"].includes(a)) {
            const v = Number(argv[++i]);
            if (!Number.isInteger(v) || v < 0) throw new Error(`bad value for ${a}`);
            o[a.slice(1)] = v;
        } else if (!o.model) {
            o.model = a;
        } else {
            throw new Error(`unexpected argument ${a}`);
        }
    }
    if (!o.model || o.t < 1 || o.r < 1)
        throw new Error("usage: llama_bench.mjs MODEL [-p N] [-n N] [-t N] [-r N]");
    return o;
}

// Deterministic ids below 100000 (ordinary BPE tokens, never end-of-generation ids).
function ids(count, seed) {
    const out = [];
    let s = seed >>> 0 || 1;
    for (let i = 0; i < count; i++) {
        s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
        out.push(1000 + (s % 99000));
    }
    return out;
}

const stats = (xs) => {
    const m = xs.reduce((a, b) => a + b, 0) / xs.length;
    const ss = xs.reduce((a, b) => a + (b - m) ** 2, 0);
    const sd = xs.length > 1 ? Math.sqrt(ss / (xs.length - 1)) : 0;
    return { avg_ts: m, stddev_ts: sd, samples_ts: xs };
};

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
    const model = await llama.loadModel({ modelPath: o.model });
    const size = Math.ceil((o.p + o.n + 16) / 256) * 256;
    // llama-bench defaults otherwise: F16 KV cache; flash attention as node-llama-cpp resolves it
    const ctx = await model.createContext({
        contextSize: size, batchSize: Math.max(o.p, 512), threads: o.t,
    });
    const seq = ctx.getSequence();
    // Like llama-bench: logits are computed for the last token of each evaluation (the output
    // head is ~half the bytes of a 4-layer model, so skipping it would flatter llama.cpp), and
    // nothing is sampled. evaluate()'s internal _noSampling flag gives exactly that.
    const decode = async (toks) => {
        const it = seq.evaluate(toks, { _noSampling: true });
        await it.next(); // decodes, then ends without yielding (no sampling)
        await it.return();
    };
    const pp = async (toks) => {
        await seq.clearHistory();
        const t0 = performance.now();
        await decode(toks);
        return (performance.now() - t0) / 1000;
    };
    const tg = async (toks) => {
        await seq.clearHistory();
        const t0 = performance.now();
        for (const t of toks) await decode([t]);
        return (performance.now() - t0) / 1000;
    };
    // warm-up: pages the weights in, builds graphs, repacks
    if (o.p) await pp(ids(Math.min(o.p, 32), 99));
    if (o.n) await tg(ids(4, 98));
    const res = [];
    if (o.p) {
        const s = [];
        for (let r = 0; r < o.r; r++) s.push(o.p / await pp(ids(o.p, 1 + r)));
        res.push({ test: `pp${o.p}`, ...stats(s) });
    }
    if (o.n) {
        const s = [];
        for (let r = 0; r < o.r; r++) s.push(o.n / await tg(ids(o.n, 100 + r)));
        res.push({ test: `tg${o.n}`, ...stats(s) });
    }
    const out = res.map((r) => ({
        model: o.model, impl: "llama.cpp", llama_cpp: llama.llamaCppRelease?.release,
        n_threads: o.t, flash_attn: ctx.flashAttention, ...r,
    }));
    console.log(JSON.stringify(out, null, 1));
}

main().then(() => process.exit(0), (e) => {
    console.error(`llama_bench: ${e.message}`);
    process.exit(1);
});
