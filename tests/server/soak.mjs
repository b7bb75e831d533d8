// SPDX-License-Identifier: MIT
// Soak driver for `glint serve` (bench/soak.sh runs it; a script, not a suite test): C clients
// loop over a seeded mix of requests for M minutes -- streamed chat, streamed completions with
// n=2, non-streamed completions with n=2, guided chat (response_format json_schema, checked with
// ajv when it stops), tool calls (tool_choice required / auto, streamed or not), streams the
// client cancels after a few chunks and non-streamed requests it drops after a delay. Every
// request that is not dropped on purpose must succeed: HTTP 200, strict SSE with [DONE], no
// error event, one finish_reason per choice out of stop / length / tool_calls, usage present.
// Every S seconds it samples the server's VmRSS and /metrics (kv pages held by requests,
// running, waiting, preemptions). At the end it waits for the server to go idle and prints the
// RSS series after the warm-up (min, max, largest deviation from the first post-warm-up sample,
// end drift) and the pages still held. With --own-server (the default when --model is given)
// it then sends SIGTERM and requires exit code 0; --sanitizer also scans the server's output for
// AddressSanitizer / LeakSanitizer / UBSan reports (LSan reports at a normal exit only).
//   node tests/server/soak.mjs --model F.gguf [--minutes 30] [--clients 8] [--sample 10]
//        [--warmup S] [--rss-limit 5] [--no-rss-check] [--sanitizer] [--out samples.json]
//   node tests/server/soak.mjs --url http://127.0.0.1:P --pid PID     (a server you started)
// --new-schemas (issue 25's schema-heavy soak): guided requests make up half the mix and each
// sends a schema no request sent before (a 300-value enum and a key named after the request), so
// every one compiles a grammar and the grammar cache keeps evicting; --grammar-cache-bytes B is
// passed to the server it starts.
// Fails (exit 1) on any failed request, RSS deviation over --rss-limit % after the warm-up,
// pages held after idle, a non-zero exit after SIGTERM or a sanitizer report.
import fs from "node:fs";
import { modelName, startServer, streamPost, http, waitIdle, rssKiB, rng, parseArgs, sleep, short, getMetrics, metricValue, schemaValidator, withTimeout, assembleChat, tail } from "./lib.mjs";

const a = parseArgs(process.argv.slice(2));
const MINUTES = Number(a.minutes ?? process.env.SOAK_MIN ?? 30);
const CLIENTS = Number(a.clients ?? 8);
const SAMPLE_S = Number(a.sample ?? 10);
const TOTAL_S = MINUTES * 60;
// Warm-up: allocator arenas, grammar cache and the prefix cache fill during the first minutes.
const WARMUP_S = Number(a.warmup ?? Math.min(300, Math.max(60, TOTAL_S / 5)));
const RSS_LIMIT = Number(a["rss-limit"] ?? 5);
const RSS_CHECK = !a["no-rss-check"];
const SANITIZER = !!a.sanitizer;
const MODEL = a.model ?? a._[0] ?? process.env.GLINT_MODEL;
const SEED = Number(a.seed ?? 1);

const MSGS = [{ role: "user", content: "Tell me a short story about a lighthouse keeper." }];
const TOOL_MSGS = [{ role: "user", content: "What is the weather in Paris, and what does ACME stock cost?" }];
const TOOLS = [
    { type: "function", function: { name: "get_weather", description: "Current weather for a city", parameters: { type: "object", properties: { city: { type: "string", maxLength: 10 }, unit: { type: "string", enum: ["c", "f"] } }, required: ["city", "unit"], additionalProperties: false } } },
    { type: "function", function: { name: "lookup_stock", description: "Stock quote", parameters: { type: "object", properties: { symbol: { type: "string", pattern: "^[A-Z]{1,5}$" }, count: { type: "integer", minimum: 1, maximum: 10 } }, required: ["symbol", "count"], additionalProperties: false } } },
];
const SCHEMA = {
    type: "object",
    properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 120 }, tags: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 3 }, ok: { type: "boolean" } },
    required: ["name", "age", "ok"],
    additionalProperties: false,
};
const validate = schemaValidator(SCHEMA);
const REASONS = new Set(["stop", "length", "tool_calls"]);
// [kind, weight]
const NEW_SCHEMAS = !!a["new-schemas"];
const MIX = [["stream_chat", 20], ["stream_comp_n2", 15], ["comp_n2", 10], ["guided", NEW_SCHEMAS ? 100 : 15], ["tools", 15], ["cancel", 13], ["disconnect", 12]];
let schemaSerial = 0;
// A schema no earlier request sent (--new-schemas): SCHEMA plus a key and a 300-value enum
// named after a counter.
function freshSchema() {
    const n = ++schemaSerial, vals = Array.from({ length: 300 }, (_, i) => `v${n}_${i}`);
    return { ...SCHEMA, properties: { ...SCHEMA.properties, [`k${n}`]: { enum: vals } }, required: [...SCHEMA.required, `k${n}`] };
}
const WSUM = MIX.reduce((s, [, w]) => s + w, 0);

function pick(r) {
    let x = r() * WSUM;
    for (const [k, w] of MIX) if ((x -= w) < 0) return k;
    return MIX[0][0];
}

async function main() {
    let base, pid = a.pid ? Number(a.pid) : null, srv = null;
    const key = a["api-key"] ?? null;
    if (a.url) base = String(a.url).replace(/\/+$/, "").replace(/\/v1$/, "");
    else {
        if (!MODEL) throw new Error("give --model F.gguf, or --url URL --pid PID");
        const args = ["--max-num-seqs", String(a["max-num-seqs"] ?? 8), "--max-waiting", "256", "--threads", String(a.threads ?? 2), "--max-model-len", "2048",
            "--kv-cache-memory", String(a["kv-cache-memory"] ?? "256KiB"), "--max-num-batched-tokens", "64", "--served-model-name", "soak", "--deep-health-interval", "0", "--shutdown-timeout", "60"];
        if (a["grammar-cache-bytes"]) args.push("--grammar-cache-bytes", String(a["grammar-cache-bytes"]));
        srv = await startServer({ model: MODEL, args, env: { VLLM_API_KEY: "" }, timeoutMs: 600000 });
        base = srv.base;
        pid = srv.proc.pid;
    }
    const name = await modelName(base, key);
    if (!pid || rssKiB(pid) === null) throw new Error(`cannot read /proc/${pid}/status (give --pid of the server)`);
    console.log(`# soak: ${CLIENTS} clients for ${MINUTES} min (warm-up ${WARMUP_S} s, sample every ${SAMPLE_S} s); server ${base} pid ${pid}; mix ${MIX.map(([k, w]) => `${k} ${w}`).join(", ")}`);

    const st = { ok: 0, failed: 0, cancelled: 0, tokens: 0, byKind: {}, reasons: [] };
    const fail = (kind, why) => {
        st.failed++;
        if (st.reasons.length < 20) {
            st.reasons.push(`${kind}: ${why}`);
            console.log(`  failed at ${((Date.now() - t0) / 1000).toFixed(0)} s: ${kind}: ${why}`);
        }
    };
    const t0 = Date.now();
    const tEnd = t0 + TOTAL_S * 1000;

    // Checks a finished (not dropped) reply; returns an error text or null.
    function checkChoices(choices, n, usage) {
        if (!Array.isArray(choices) || choices.length !== n) return `${choices?.length} choices, want ${n}`;
        for (const c of choices) if (!REASONS.has(c.finish_reason)) return `choice ${c.index} finish_reason ${short(c.finish_reason)}`;
        if (!usage || !(usage.completion_tokens > 0)) return `usage ${short(usage)}`;
        st.tokens += usage.completion_tokens;
        return null;
    }
    async function stream(path, body, onChunk) {
        const s = await streamPost(base, path, body, { key, onChunk, timeoutMs: 600000 });
        if (s.aborted) return { aborted: true };
        if (s.status !== 200) return { why: `HTTP ${s.status} ${short(s.text, 200)}` };
        if (s.sse.problems.length) return { why: `SSE: ${s.sse.problems.join("; ")}` };
        const err = s.sse.chunks.find((c) => c.error);
        if (err) return { why: `error event ${short(err, 200)}` };
        return { chunks: s.sse.chunks };
    }
    async function one(kind, r, ci, k) {
        const seed = SEED * 1e6 + ci * 10000 + k;
        const mt = 16 + Math.floor(r() * 49);
        switch (kind) {
            case "stream_chat": {
                const s = await stream("/v1/chat/completions", { model: name, messages: MSGS, stream: true, stream_options: { include_usage: true }, max_tokens: mt, temperature: 1, seed });
                if (s.why) return s.why;
                const m = assembleChat(s.chunks);
                return checkChoices(m.choices, 1, m.usage);
            }
            case "stream_comp_n2": {
                const s = await stream("/v1/completions", { model: name, prompt: `Once upon a time ${ci}`, n: 2, stream: true, stream_options: { include_usage: true }, max_tokens: mt, temperature: 1, seed });
                if (s.why) return s.why;
                const fr = new Map();
                for (const c of s.chunks) for (const ch of c.choices ?? []) if (ch.finish_reason) fr.set(ch.index, ch.finish_reason);
                const usage = s.chunks[s.chunks.length - 1]?.usage;
                return checkChoices([...fr].map(([index, finish_reason]) => ({ index, finish_reason })), 2, usage);
            }
            case "comp_n2": {
                const h = await http(base, "POST", "/v1/completions", { key, body: { model: name, prompt: `The river ${ci} ${k}`, n: 2, max_tokens: mt, temperature: 1, seed }, timeoutMs: 600000 });
                if (h.status !== 200) return `HTTP ${h.status} ${short(h.text, 200)}`;
                return checkChoices(h.json?.choices, 2, h.json?.usage);
            }
            case "guided": {
                const schema = NEW_SCHEMAS ? freshSchema() : SCHEMA;
                const body = { model: name, messages: [{ role: "user", content: `Describe person ${k} as JSON.` }], max_tokens: 128, temperature: 1, seed, response_format: { type: "json_schema", json_schema: { name: "person", schema } } };
                const h = await http(base, "POST", "/v1/chat/completions", { key, body, timeoutMs: 600000 });
                if (h.status !== 200) return `HTTP ${h.status} ${short(h.text, 200)}`;
                const c = h.json?.choices?.[0];
                const bad = checkChoices(h.json?.choices, 1, h.json?.usage);
                if (bad) return bad;
                if (c.finish_reason === "stop") {
                    let doc;
                    try {
                        doc = JSON.parse(c.message.content);
                    } catch {
                        return `guided reply is not JSON: ${short(c.message.content, 200)}`;
                    }
                    const v = (NEW_SCHEMAS ? schemaValidator(schema) : validate)(doc);
                    if (v) return `guided reply fails the schema: ${v}`;
                }
                return null;
            }
            case "tools": {
                const body = { model: name, messages: TOOL_MSGS, tools: TOOLS, tool_choice: r() < 0.5 ? "required" : "auto", max_tokens: 128, temperature: 1, seed, thinking_token_budget: 16 };
                if (r() < 0.5) {
                    const s = await stream("/v1/chat/completions", { ...body, stream: true, stream_options: { include_usage: true } });
                    if (s.why) return s.why;
                    const m = assembleChat(s.chunks);
                    return checkChoices(m.choices, 1, m.usage);
                }
                const h = await http(base, "POST", "/v1/chat/completions", { key, body, timeoutMs: 600000 });
                if (h.status !== 200) return `HTTP ${h.status} ${short(h.text, 200)}`;
                return checkChoices(h.json?.choices, 1, h.json?.usage);
            }
            case "cancel": {
                const after = Math.floor(r() * 3);
                const chat = r() < 0.5;
                const body = chat ? { model: name, messages: MSGS, stream: true, max_tokens: 400, temperature: 1, seed } : { model: name, prompt: `A long tale ${ci}`, stream: true, max_tokens: 400, temperature: 1, ignore_eos: true, n: 2, seed };
                const s = await stream(chat ? "/v1/chat/completions" : "/v1/completions", body, (_, n) => n >= after);
                if (s.aborted) {
                    st.cancelled++;
                    return null;
                }
                if (s.why) return s.why;
                return null; // finished before the cancel point (a short reply): fine
            }
            case "disconnect": {
                const ac = new AbortController();
                const p = fetch(`${base}/v1/completions`, { method: "POST", signal: ac.signal, headers: { "content-type": "application/json" }, body: JSON.stringify({ model: name, prompt: `Drop me ${ci}`, max_tokens: 300, ignore_eos: true, temperature: 1, seed }) })
                    .then((x) => x.text().then((t) => ({ status: x.status, t })))
                    .catch((e) => ({ aborted: e?.name === "AbortError" || ac.signal.aborted, e }));
                const tm = setTimeout(() => ac.abort(), 100 + Math.floor(r() * 700));
                const res = await p;
                clearTimeout(tm);
                if (res.aborted) {
                    st.cancelled++;
                    return null;
                }
                if (res.e) return `fetch: ${res.e?.cause?.code ?? res.e?.message}`;
                if (res.status !== 200) return `HTTP ${res.status} ${short(res.t, 200)}`;
                return null;
            }
        }
        return `unknown kind ${kind}`;
    }
    async function clientLoop(ci) {
        const r = rng(SEED * 7919 + ci);
        for (let k = 0; Date.now() < tEnd; k++) {
            const kind = pick(r);
            st.byKind[kind] = (st.byKind[kind] ?? 0) + 1;
            let why;
            try {
                why = await one(kind, r, ci, k);
            } catch (e) {
                why = `exception: ${e?.cause?.code ?? e?.message}`;
            }
            if (why) fail(kind, why);
            else st.ok++;
        }
    }

    const samples = [];
    async function sample() {
        const s = { t: (Date.now() - t0) / 1000, rss_kib: rssKiB(pid) };
        try {
            const { series } = await getMetrics(base);
            s.held = metricValue(series, "glint:kv_pages_held_by_requests", { model_name: name });
            s.total = metricValue(series, "glint:kv_pages_total", { model_name: name });
            s.running = metricValue(series, "vllm:num_requests_running", { model_name: name });
            s.waiting = metricValue(series, "vllm:num_requests_waiting", { model_name: name });
            s.preemptions = metricValue(series, "vllm:num_preemptions_total", { model_name: name });
        } catch (e) {
            s.metrics_error = e.message;
        }
        s.ok = st.ok;
        s.failed = st.failed;
        s.cancelled = st.cancelled;
        samples.push(s);
        console.log(`t ${s.t.toFixed(0).padStart(5)} s  rss ${s.rss_kib} KiB  pages held ${s.held}/${s.total}  running ${s.running} waiting ${s.waiting}  preemptions ${s.preemptions}  ok ${s.ok} failed ${s.failed} cancelled ${s.cancelled}`);
    }
    let sampling = true;
    const sampler = (async () => {
        while (sampling) {
            await sample();
            const next = t0 + samples.length * SAMPLE_S * 1000;
            while (sampling && Date.now() < next) await sleep(Math.min(500, Math.max(1, next - Date.now())));
        }
    })();
    await Promise.all(Array.from({ length: CLIENTS }, (_, i) => clientLoop(i)));
    sampling = false;
    await sampler;
    const wall = (Date.now() - t0) / 1000;
    const idle = await waitIdle(base, name, 60000);
    await sample(); // the idle one
    const last = samples[samples.length - 1];

    const post = samples.filter((s) => s.t >= WARMUP_S && s.rss_kib);
    let rssLine = "RSS: no samples after the warm-up", rssOk = !RSS_CHECK;
    if (post.length >= 2) {
        const b = post[0].rss_kib, rs = post.map((s) => s.rss_kib);
        const mn = Math.min(...rs), mx = Math.max(...rs);
        const dev = Math.max(...rs.map((x) => Math.abs(x - b))) / b * 100;
        const drift = (rs[rs.length - 1] - b) / b * 100;
        rssLine = `RSS after warm-up (${post.length} samples from t=${post[0].t.toFixed(0)} s): first ${b} KiB, min ${mn}, max ${mx}, end ${rs[rs.length - 1]}; max deviation ${dev.toFixed(2)}%, end drift ${drift >= 0 ? "+" : ""}${drift.toFixed(2)}% (limit ±${RSS_LIMIT}%${RSS_CHECK ? "" : ", not checked"})`;
        rssOk = !RSS_CHECK || dev <= RSS_LIMIT;
    }
    console.log(`requests ok ${st.ok}, failed ${st.failed}, cancelled/dropped on purpose ${st.cancelled}; ${st.tokens} completion tokens in ${wall.toFixed(0)} s; by kind ${short(st.byKind)}`);
    for (const r of st.reasons) console.log("  " + r);
    console.log(rssLine);
    console.log(`after the load: running ${idle.running}, waiting ${idle.waiting}, kv pages held ${idle.held} of ${last.total} (waited ${idle.waited_ms} ms); preemptions ${last.preemptions}`);
    if (a.out) fs.writeFileSync(a.out, JSON.stringify({ minutes: MINUTES, clients: CLIENTS, warmup_s: WARMUP_S, samples, stats: st }, null, 1));

    let exitOk = true, sanOk = true;
    if (srv) {
        srv.proc.kill("SIGTERM");
        const ex = await withTimeout(srv.exited, 180000, "server exit after SIGTERM").catch((e) => ({ code: `none (${e.message})` }));
        exitOk = ex.code === 0;
        console.log(`server exit after SIGTERM: code ${ex.code}${ex.signal ? ` signal ${ex.signal}` : ""}`);
        const log = srv.log();
        if (a["server-log"]) fs.writeFileSync(a["server-log"], log);
        if (SANITIZER) {
            const hits = log.split("\n").filter((l) => /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: \w+Sanitizer/.test(l));
            sanOk = hits.length === 0 && exitOk;
            console.log(`sanitizer reports in the server output: ${hits.length}${hits.length ? "\n  " + hits.slice(0, 10).join("\n  ") : ""}`);
            if (!hits.length && !exitOk) console.log(`server log tail: ${tail(log, 2000)}`);
        }
    }
    const ok = st.failed === 0 && st.ok > 0 && rssOk && idle.ok && exitOk && sanOk;
    console.log(ok ? "soak: OK" : "soak: FAILED");
    process.exit(ok ? 0 : 1);
}
main().catch((e) => {
    console.log(`soak: FAILED: ${e?.stack ?? e}`);
    process.exit(1);
});
