// SPDX-License-Identifier: MIT
// Memory under hostile load (issue 25): a client sends schema after schema, each new, each
// expensive to compile and to mask, and the server's RSS must stay bounded by its budgets and
// come back to a plateau. Against `glint serve` on the tiny random-weight model, with a small
// --grammar-cache-bytes so that the cache is full after a few dozen requests:
//   phase enum:     N schemas, each one object property holding one 3,000-value `enum`;
//   phase patterns: N schemas, each with 50 string properties under 50 distinct `pattern`s;
//   phase mix:      N schemas alternating the two kinds;
//   phase round2:   N more of the mix, all new.
//   phase images:   with --vision DIR, a second server on that HF checkpoint with a vision tower
//                   (`glint make-model --format safetensors`): M requests, each a new schema of
//                   either kind with 1-3 new PNG or JPEG images of random sizes (28-672 px a side,
//                   made by Pillow at test time), against a small --mm-processor-cache-gb too.
// Every 50 requests (10 in the images phase) it samples VmRSS (/proc/PID/status) and asserts
//   RSS <= start + --grammar-cache-bytes (+ the encoder cache budget for images) + 150 MB,
// where start is the RSS after a warm-up (vocabulary index, thread scratch, allocator arenas,
// the weights' pages) and the 150 MB covers what the requests in flight hold outside the caches
// (their grammars may have been evicted while they run; image decode and encoder scratch) and
// the allocator's slack. Then the plateau: round2's peak is at most 50 MB over the peak of the
// phases before it, and the images phase's second half peaks within 50 MB of its first half.
// Each request goes through the official openai SDK (response_format json_schema) and must
// answer 200; the compile ceiling (--grammar-compile-bytes) must answer a 400 naming the schema
// part; each cache's own count (/metrics) must stay within its budget, and the encoder cache
// must have filled to at least 3/4 of its budget (so that budget was exercised).
// Negative control (--budget-off, run by hand, numbers in docs/SECURITY.md): with the budget
// effectively unlimited the enum phase's RSS passes the bound, so the bound is not vacuous.
//
// Usage: node tests/server/memory.mjs --model M [--n 600] [--concurrency 3] [--budget 48MiB]
//        [--vision HF_DIR [--images 100] [--mm-budget 8MiB]] [--budget-off] [--out samples.json]
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { OpenAI, startServer, modelName, rssKiB, rng, parseArgs, assert, getMetrics, metricValue } from "./lib.mjs";

const a = parseArgs(process.argv.slice(2));
const MODEL = a.model ?? a._[0];
if (!MODEL) {
    console.error("usage: node tests/server/memory.mjs --model M [--n 600] [--concurrency 3]");
    process.exit(2);
}
const N = Number(a.n ?? 600);
const CONC = Number(a.concurrency ?? 3);
const BUDGET_MB = Number(String(a.budget ?? "48MiB").replace(/MiB$/, ""));
const BUDGET_OFF = !!a["budget-off"];
const VISION = a.vision ?? null;
const N_IMG = Number(a.images ?? 100);
const MM_MB = Number(String(a["mm-budget"] ?? "8MiB").replace(/MiB$/, ""));
const SLACK_MB = 150;
const PLATEAU_MB = 50;
const SAMPLE_EVERY = 50;
const MB = (kib) => kib / 1024;

const ENUM_VALUES = 3000;
const PATTERNS = 50;
const rand = rng(25);
const word = (n) => {
    let s = "";
    for (let i = 0; i < n; i++) s += String.fromCharCode(97 + Math.floor(rand() * 26));
    return s;
};
// One object property holding a 3,000-value enum; every value new (request index in it), so
// nothing is shared with an earlier schema (cache key, DFA, masks).
function enumSchema(i) {
    const values = [];
    for (let k = 0; k < ENUM_VALUES; k++) values.push(`${word(6)}${i}-${k}${word(4)}`);
    return { type: "object", properties: { v: { enum: values } }, required: ["v"], additionalProperties: false };
}
// 50 string properties, each under its own pattern (distinct literals and classes per request).
function patternSchema(i) {
    const properties = {};
    for (let k = 0; k < PATTERNS; k++)
        properties[`p${k}`] = { type: "string", pattern: `^${word(3)}${i}[${word(2)}0-9]{1,${2 + (k % 7)}}(${word(2)}|${word(3)})*$` };
    return { type: "object", properties, additionalProperties: false };
}

// Images of random sizes for the images phase, made by Pillow (Debian python3-pil) in one call:
// count files, PNG or JPEG at random, each an 8x8 random image upscaled bilinearly to a random
// size (smooth, so the files stay small), all different. Returns [{ mime, data }] (base64).
function makeImages(count, seed) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "glint-memory-"));
    const py = `
import random, sys
from PIL import Image
d, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(seed)
for i in range(n):
    w, h = r.randint(28, 672), r.randint(28, 672)
    small = Image.frombytes("RGB", (8, 8), bytes(r.randrange(256) for _ in range(192)))
    img = small.resize((w, h), Image.BILINEAR)
    if r.random() < 0.5:
        img.save(f"{d}/{i:04d}.png")
    else:
        img.save(f"{d}/{i:04d}.jpg", quality=85)
`;
    const r = spawnSync("/usr/bin/python3", ["-c", py, dir, String(count), String(seed)], { encoding: "utf8" });
    assert(r.status === 0, `making images with python3-pil: ${r.stderr || r.error}`);
    const files = fs.readdirSync(dir).sort();
    const out = files.map((f) => ({ mime: f.endsWith(".png") ? "image/png" : "image/jpeg", data: fs.readFileSync(path.join(dir, f)).toString("base64") }));
    fs.rmSync(dir, { recursive: true, force: true });
    return out;
}

let srv;
let failures = 0;
const failLines = [];
const samples = [];

// One server under test: start it, send schema requests through the openai SDK, sample its RSS
// and its caches' own counts.
async function session(model, args, label) {
    srv = await startServer({ model, args, env: { VLLM_API_KEY: "" } });
    const pid = srv.proc.pid;
    const startLine = srv.log().split("\n").find((l) => /grammar cache \d+ bytes/.test(l)) ?? null;
    console.log(`${label}: ${startLine ?? "no start-up line with the grammar cache budget"}`);
    assert(rssKiB(pid) !== null, `cannot read /proc/${pid}/status`);
    const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });
    const name = await modelName(srv.base);
    const S = { srv, pid, startLine, sent: 0 };
    S.one = async (schema, images = []) => {
        const content = images.length ? [...images.map((im) => ({ type: "image_url", image_url: { url: `data:${im.mime};base64,${im.data}` } })), { type: "text", text: "answer" }] : "answer";
        const r = await client.chat.completions.create({
            model: name,
            messages: [{ role: "user", content }],
            max_tokens: 6,
            temperature: 0,
            response_format: { type: "json_schema", json_schema: { name: "x", schema } },
        });
        if (!r.choices?.[0]) throw new Error("no choice");
    };
    // RSS, and what the caches say they hold (glint:grammar_cache_bytes, glint:mm_cache_bytes).
    S.sample = async (phase, n) => {
        const s = { phase, n, rss_mib: Math.round(MB(rssKiB(pid))) };
        const m = await getMetrics(srv.base).catch(() => null);
        const val = (k) => (m ? metricValue(m.series, k) : undefined);
        const mib = (v) => (v === undefined ? null : Math.round((10 * v) / 1048576) / 10);
        s.cache_mib = mib(val("glint:grammar_cache_bytes"));
        s.cache_entries = val("glint:grammar_cache_entries") ?? null;
        s.mm_mib = mib(val("glint:mm_cache_bytes"));
        samples.push(s);
        console.log(`${phase.padEnd(9)} ${String(n).padStart(4)} requests  RSS ${s.rss_mib} MiB  cache ${s.cache_mib} MiB in ${s.cache_entries} grammars${s.mm_mib === null ? "" : `  encoder cache ${s.mm_mib} MiB`}`);
        return s;
    };
    // Sends count requests from make(i) -> [schema, images] with CONC clients, sampling every
    // `every` requests.
    S.phase = async (phase, count, make, every = SAMPLE_EVERY) => {
        let next = 0, done = 0;
        const worker = async () => {
            while (next < count) {
                const i = S.sent + next++;
                try {
                    await S.one(...make(i));
                } catch (e) {
                    failures++;
                    if (failLines.length < 5) failLines.push(`${phase} #${i}: ${e.status ?? ""} ${e.message}`);
                }
                if (++done % every === 0) await S.sample(phase, done);
            }
        };
        const t = Date.now();
        await Promise.all(Array.from({ length: CONC }, worker));
        S.sent += count;
        if (count >= every) console.log(`${phase}: ${count} requests in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    };
    return S;
}

const mixed = (i) => (i % 2 ? enumSchema(i) : patternSchema(i));

async function main() {
    const gcache = ["--grammar-compile-bytes", "8MiB", "--grammar-cache-bytes", BUDGET_OFF ? "64GiB" : `${BUDGET_MB}MiB`];
    const S = await session(MODEL, ["--max-num-seqs", "4", "--kv-cache-memory", "64MiB", "--max-model-len", "512", ...gcache], "text");
    const t0 = Date.now();
    // Warm-up: the vocabulary's shared tables, every connection thread's arena and scratch.
    await S.phase("warm-up", 2 * CONC, (i) => [mixed(i)]);
    const start = (await S.sample("start", 0)).rss_mib;
    const bound = start + BUDGET_MB + SLACK_MB;
    console.log(`bound: start ${start} MiB + --grammar-cache-bytes ${BUDGET_MB} MiB + ${SLACK_MB} MiB = ${bound} MiB` + (BUDGET_OFF ? " (budget off: negative control, the bound should be passed)" : ""));
    await S.phase("enum", N, (i) => [enumSchema(i)]);
    await S.phase("patterns", N, (i) => [patternSchema(i)]);
    await S.phase("mix", N, (i) => [mixed(i)]);
    const peak1 = Math.max(...samples.map((s) => s.rss_mib));
    await S.phase("round2", N, (i) => [mixed(i)]);
    const peak2 = Math.max(...samples.map((s) => s.rss_mib));
    const secs = (Date.now() - t0) / 1000;
    // The per-compile ceiling (--grammar-compile-bytes 8MiB here; a 3,000-value enum takes ~2 MB):
    // four 8,000-value enums are a 400 that names the schema part, not a 200 or a 500.
    let ceiling = "not checked";
    try {
        const big = { type: "object", properties: {} };
        for (let k = 0; k < 4; k++) big.properties[`e${k}`] = { enum: Array.from({ length: 8000 }, (_, j) => `${word(8)}${j}`) };
        await S.one(big);
        ceiling = "FAIL: a schema over the compile ceiling was answered 200";
    } catch (e) {
        ceiling = e.status === 400 && /\/properties\/e\d/.test(e.message) && /compile limit/.test(e.message) ? "ok" : `FAIL: ${e.status} ${e.message}`;
    }
    console.log(`compile ceiling: ${ceiling}`);
    const over = samples.filter((s) => s.rss_mib > bound);
    console.log(`peak before round2 ${peak1} MiB, after ${peak2} MiB (+${peak2 - peak1}, limit +${PLATEAU_MB}); ${S.sent} requests in ${secs.toFixed(1)} s, ${failures} failed`);
    await srv.stop();
    const V = VISION && !BUDGET_OFF ? await imagesPhase() : null;
    if (a.out) fs.writeFileSync(a.out, JSON.stringify({ start, bound, budget_mib: BUDGET_OFF ? null : BUDGET_MB, images: V, samples }, null, 1));
    if (failLines.length) console.log(`failed requests (first ${failLines.length}):\n  ${failLines.join("\n  ")}`);
    if (BUDGET_OFF) {
        // The negative control passes when the bound is passed.
        console.log(over.length ? `negative control: the bound was passed at ${over[0].phase} ${over[0].n} (${over[0].rss_mib} MiB)` : "negative control FAILED: RSS stayed within the small-budget bound");
        return over.length ? 0 : 1;
    }
    let ok = true;
    const fail = (msg) => {
        ok = false;
        console.log(`FAIL ${msg}`);
    };
    if (failures) fail(`${failures} requests failed`);
    if (over.length) fail(`RSS over the bound ${bound} MiB at ${over.map((s) => `${s.phase} ${s.n}: ${s.rss_mib}`).join(", ")}`);
    const overBudget = samples.filter((s) => s.cache_mib === null || s.cache_mib > BUDGET_MB);
    if (overBudget.length) fail(`glint:grammar_cache_bytes missing or over --grammar-cache-bytes at ${overBudget.map((s) => `${s.phase} ${s.n}: ${s.cache_mib}`).join(", ")}`);
    if (ceiling !== "ok") fail(`compile ceiling: ${ceiling}`);
    if (peak2 - peak1 > PLATEAU_MB) fail(`no plateau: round2 raised the peak by ${peak2 - peak1} MiB (limit ${PLATEAU_MB})`);
    if (!S.startLine) fail("the start-up log does not print the grammar cache budget");
    if (V) for (const m of V.fails) fail(m);
    console.log(ok ? "memory: OK" : "memory: FAILED");
    return ok ? 0 : 1;
}

// The images phase: a second server on the vision checkpoint, its own start and bound (its
// weights and encoder differ), new schemas with new images of random sizes. Returns the numbers
// and the failed checks.
async function imagesPhase() {
    const SAMPLE_IMG = 10;
    const t0 = Date.now();
    const per = (i) => 1 + (i % 3); // 1-3 images a request
    let total = 0;
    for (let i = 0; i < N_IMG + 2 * CONC; i++) total += per(i);
    const images = makeImages(total, 25);
    console.log(`images: ${images.length} made in ${((Date.now() - t0) / 1000).toFixed(1)} s (${images.filter((x) => x.mime === "image/png").length} PNG)`);
    let used = 0;
    const take = (i) => images.slice(used, (used += per(i)));
    const args = ["--max-num-seqs", "4", "--kv-cache-memory", "64MiB", "--max-model-len", "4096", "--grammar-compile-bytes", "8MiB", "--grammar-cache-bytes", `${BUDGET_MB}MiB`, "--mm-processor-cache-gb", String(MM_MB / 1024)];
    const S = await session(VISION, args, "images");
    const first = samples.length;
    await S.phase("img-warm", 2 * CONC, (i) => [mixed(i + 100000), take(i)]);
    const start = (await S.sample("img-start", 0)).rss_mib;
    const bound = start + BUDGET_MB + MM_MB + SLACK_MB;
    console.log(`images bound: start ${start} MiB + --grammar-cache-bytes ${BUDGET_MB} MiB + --mm-processor-cache-gb ${MM_MB} MiB + ${SLACK_MB} MiB = ${bound} MiB`);
    const half = Math.floor(N_IMG / 2);
    await S.phase("images", half, (i) => [mixed(i + 100000), take(i)], SAMPLE_IMG);
    const mine = () => samples.slice(first);
    const peak1 = Math.max(...mine().map((s) => s.rss_mib));
    await S.phase("images2", N_IMG - half, (i) => [mixed(i + 100000), take(i)], SAMPLE_IMG);
    const peak2 = Math.max(...mine().map((s) => s.rss_mib));
    await srv.stop();
    const secs = (Date.now() - t0) / 1000;
    const fails = [];
    const over = mine().filter((s) => s.rss_mib > bound);
    if (over.length) fails.push(`images: RSS over the bound ${bound} MiB at ${over.map((s) => `${s.phase} ${s.n}: ${s.rss_mib}`).join(", ")}`);
    const mmMax = Math.max(...mine().map((s) => s.mm_mib ?? Infinity));
    if (!(mmMax <= MM_MB)) fails.push(`glint:mm_cache_bytes missing or over the encoder cache budget (${mmMax} MiB > ${MM_MB})`);
    else if (mmMax < 0.75 * MM_MB) fails.push(`the encoder cache held at most ${mmMax} MiB of its ${MM_MB} MiB: its budget was not exercised`);
    const gOver = mine().filter((s) => s.cache_mib === null || s.cache_mib > BUDGET_MB);
    if (gOver.length) fails.push(`images: glint:grammar_cache_bytes missing or over budget at ${gOver.map((s) => `${s.phase} ${s.n}`).join(", ")}`);
    if (peak2 - peak1 > PLATEAU_MB) fails.push(`images: no plateau: the second half raised the peak by ${peak2 - peak1} MiB (limit ${PLATEAU_MB})`);
    console.log(`images: ${used} images in ${S.sent} requests, ${secs.toFixed(1)} s; peak ${peak1} MiB after the first half, ${peak2} MiB after the second (+${peak2 - peak1}); encoder cache at most ${mmMax} MiB`);
    return { start, bound, mm_budget_mib: MM_MB, peak1, peak2, fails };
}

main()
    .then((rc) => process.exit(rc))
    .catch(async (e) => {
        console.error(`memory: FAILED: ${e.stack ?? e}`);
        if (srv) await srv.stop();
        process.exit(1);
    });
