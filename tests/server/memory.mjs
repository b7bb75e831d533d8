// SPDX-License-Identifier: MIT
// Memory under hostile load (issue 25): a client sends schema after schema, each new, each
// expensive to compile and to mask, and the server's RSS must stay bounded by its budgets and
// come back to a plateau. Against `glint serve` on the tiny random-weight model, with a small
// --grammar-cache-bytes so that the cache is full after a few dozen requests:
//   phase enum:     N schemas, each one object property holding one 3,000-value `enum`;
//   phase patterns: N schemas, each with 50 string properties under 50 distinct `pattern`s;
//   phase mix:      N schemas alternating the two kinds;
//   phase round2:   N more of the mix, all new.
// Every 50 requests it samples VmRSS (/proc/PID/status) and asserts
//   RSS <= start + --grammar-cache-bytes + 150 MB,
// where start is the RSS after a warm-up (vocabulary index, thread scratch, allocator arenas) and
// the 150 MB covers what the requests in flight hold outside the cache (their grammars may have
// been evicted while they run) and the allocator's slack. Then the plateau: round2's peak is at
// most 50 MB over the peak of the phases before it. Each request goes through the official
// openai SDK (response_format json_schema) and must answer 200; the compile ceiling
// (--grammar-compile-bytes) must answer a 400 naming the schema part.
// Negative control (--budget-off, run by hand, numbers in docs/SECURITY.md): with the budget
// effectively unlimited the enum phase's RSS passes the bound, so the bound is not vacuous.
//
// Usage: node tests/server/memory.mjs --model M [--n 600] [--concurrency 3] [--budget 48MiB]
//        [--budget-off] [--out samples.json]
import fs from "node:fs";
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

let srv;
async function main() {
    const args = ["--max-num-seqs", "4", "--kv-cache-memory", "64MiB", "--max-model-len", "512", "--grammar-compile-bytes", "8MiB", "--grammar-cache-bytes", BUDGET_OFF ? "64GiB" : `${BUDGET_MB}MiB`];
    srv = await startServer({ model: MODEL, args, env: { VLLM_API_KEY: "" } });
    const pid = srv.proc.pid;
    const startLine = srv.log().split("\n").find((l) => /grammar cache \d+ bytes/.test(l)) ?? null;
    console.log(startLine ?? "no start-up line with the grammar cache budget");
    assert(rssKiB(pid) !== null, `cannot read /proc/${pid}/status`);
    const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });
    const model = await modelName(srv.base);
    let failures = 0, sent = 0;
    const failLines = [];
    async function one(schema) {
        const r = await client.chat.completions.create({
            model,
            messages: [{ role: "user", content: "answer" }],
            max_tokens: 6,
            temperature: 0,
            response_format: { type: "json_schema", json_schema: { name: "x", schema } },
        });
        if (!r.choices?.[0]) throw new Error("no choice");
    }
    const samples = [];
    // RSS, and what the cache says it holds (glint:grammar_cache_bytes, the server's own count).
    const sample = async (phase, n) => {
        const s = { phase, n, rss_mib: Math.round(MB(rssKiB(pid))) };
        const m = await getMetrics(srv.base).catch(() => null);
        const bytes = m ? metricValue(m.series, "glint:grammar_cache_bytes") : undefined;
        s.cache_mib = bytes === undefined ? null : Math.round((10 * bytes) / 1048576) / 10;
        s.cache_entries = m ? metricValue(m.series, "glint:grammar_cache_entries") ?? null : null;
        samples.push(s);
        console.log(`${phase.padEnd(9)} ${String(n).padStart(4)} requests  RSS ${s.rss_mib} MiB  cache ${s.cache_mib} MiB in ${s.cache_entries} grammars`);
        return s;
    };
    // Sends count schemas from make(i) with CONC clients, sampling every SAMPLE_EVERY requests.
    async function phase(name, count, make) {
        let next = 0, done = 0;
        const worker = async () => {
            while (next < count) {
                const i = sent + next++;
                try {
                    await one(make(i));
                } catch (e) {
                    failures++;
                    if (failLines.length < 5) failLines.push(`${name} #${i}: ${e.status ?? ""} ${e.message}`);
                }
                if (++done % SAMPLE_EVERY === 0) await sample(name, done);
            }
        };
        const t = Date.now();
        await Promise.all(Array.from({ length: CONC }, worker));
        sent += count;
        if (count >= SAMPLE_EVERY) console.log(`${name}: ${count} requests in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    }
    const mixed = (i) => (i % 2 ? enumSchema(i) : patternSchema(i));
    const t0 = Date.now();
    // Warm-up: the vocabulary's shared tables, every connection thread's arena and scratch.
    await phase("warm-up", 2 * CONC, mixed);
    const start = (await sample("start", 0)).rss_mib;
    const bound = start + BUDGET_MB + SLACK_MB;
    console.log(`bound: start ${start} MiB + --grammar-cache-bytes ${BUDGET_MB} MiB + ${SLACK_MB} MiB = ${bound} MiB` + (BUDGET_OFF ? " (budget off: negative control, the bound should be passed)" : ""));
    await phase("enum", N, enumSchema);
    await phase("patterns", N, patternSchema);
    await phase("mix", N, mixed);
    const peak1 = Math.max(...samples.map((s) => s.rss_mib));
    await phase("round2", N, mixed);
    const peak2 = Math.max(...samples.map((s) => s.rss_mib));
    const secs = (Date.now() - t0) / 1000;
    // The per-compile ceiling (--grammar-compile-bytes 8MiB here; a 3,000-value enum takes ~2 MB):
    // four 8,000-value enums are a 400 that names the schema part, not a 200 or a 500.
    let ceiling = "not checked";
    try {
        const big = { type: "object", properties: {} };
        for (let k = 0; k < 4; k++) big.properties[`e${k}`] = { enum: Array.from({ length: 8000 }, (_, j) => `${word(8)}${j}`) };
        await one(big);
        ceiling = "FAIL: a schema over the compile ceiling was answered 200";
    } catch (e) {
        ceiling = e.status === 400 && /\/properties\/e\d/.test(e.message) && /compile limit/.test(e.message) ? "ok" : `FAIL: ${e.status} ${e.message}`;
    }
    console.log(`compile ceiling: ${ceiling}`);
    const over = samples.filter((s) => s.rss_mib > bound);
    console.log(`peak before round2 ${peak1} MiB, after ${peak2} MiB (+${peak2 - peak1}, limit +${PLATEAU_MB}); ${sent} requests in ${secs.toFixed(1)} s, ${failures} failed`);
    if (a.out) fs.writeFileSync(a.out, JSON.stringify({ start, bound, budget_mib: BUDGET_OFF ? null : BUDGET_MB, samples }, null, 1));
    await srv.stop();
    if (failLines.length) console.log(`failed requests (first ${failLines.length}):\n  ${failLines.join("\n  ")}`);
    if (BUDGET_OFF) {
        // The negative control passes when the bound is passed.
        console.log(over.length ? `negative control: the bound was passed at ${over[0].phase} ${over[0].n} (${over[0].rss_mib} MiB)` : "negative control FAILED: RSS stayed within the small-budget bound");
        return over.length ? 0 : 1;
    }
    let ok = true;
    if (failures) {
        ok = false;
        console.log(`FAIL ${failures} requests failed`);
    }
    if (over.length) {
        ok = false;
        console.log(`FAIL RSS over the bound ${bound} MiB at ${over.map((s) => `${s.phase} ${s.n}: ${s.rss_mib}`).join(", ")}`);
    }
    const overBudget = samples.filter((s) => s.cache_mib === null || s.cache_mib > BUDGET_MB);
    if (overBudget.length) {
        ok = false;
        console.log(`FAIL glint:grammar_cache_bytes missing or over --grammar-cache-bytes at ${overBudget.map((s) => `${s.phase} ${s.n}: ${s.cache_mib}`).join(", ")}`);
    }
    if (ceiling !== "ok") {
        ok = false;
        console.log(`FAIL compile ceiling: ${ceiling}`);
    }
    if (peak2 - peak1 > PLATEAU_MB) {
        ok = false;
        console.log(`FAIL no plateau: round2 raised the peak by ${peak2 - peak1} MiB (limit ${PLATEAU_MB})`);
    }
    if (!startLine) {
        ok = false;
        console.log("FAIL the start-up log does not print the grammar cache budget");
    }
    console.log(ok ? "memory: OK" : "memory: FAILED");
    return ok ? 0 : 1;
}

main()
    .then((rc) => process.exit(rc))
    .catch(async (e) => {
        console.error(`memory: FAILED: ${e.stack ?? e}`);
        if (srv) await srv.stop();
        process.exit(1);
    });
