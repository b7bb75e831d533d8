// SPDX-License-Identifier: MIT
// Server operations (issue 19): the access log, vLLM's request histograms (scraped after known
// requests: counts and sums must match what was sent), CORS with vLLM's flags, IPv6 on ::1, the
// KV pool and max_model_len fitted to a small "available memory" (GLINT_MEM_AVAILABLE), which
// `glint plan` must predict, vLLM's flag spellings, and --generation-config from an HF folder.
//   node tests/server/ops.mjs MODEL.gguf      (the tiny Q8_0 preset)
// Prints PASS/FAIL per check and `N passed, M failed`; exits 1 on any failure.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
    GLINT_BIN, startServer, runGlint, http, expectError, getMetrics, metricValue, freePort, sleep,
    short, tail, checkRunner, assert, SERVE_DEVICE_ARGS, T,
} from "./lib.mjs";

const MODEL = process.argv[2] || process.env.GLINT_MODEL;
if (!MODEL) {
    console.error("usage: node tests/server/ops.mjs MODEL.gguf");
    process.exit(2);
}
const { check, counts } = checkRunner(40000);
setTimeout(() => {
    console.log(`FAIL ops.deadline: over ${T(150000) / 1000} s`);
    process.exit(1);
}, T(150000)).unref();
// Access lines are written when libmicrohttpd reports the request complete, which may be just
// after the client has read the answer: poll the log (bounded).
async function waitLog(getLog, re, ms = 3000) {
    for (const t0 = Date.now(); !re.test(getLog()) && Date.now() - t0 < ms;) await sleep(25);
    return re.test(getLog());
}
const NAME = "ops";
const chat = (content, extra = {}) => ({ model: NAME, messages: [{ role: "user", content }], ...extra });

// ---- one server for the access log, metrics and CORS ----
const srv = await startServer({
    model: MODEL,
    args: ["--served-model-name", NAME, "--max-model-len", "512", "--no-enable-prefix-caching", "--deep-health-interval", "0",
        "--allowed-origins", '["http://ok.test"]', "--allowed-headers", "content-type,x-custom"],
});
const B = srv.base;

await check("access_log.lines", async () => {
    const secret = "SECRET-BODY-" + Math.random().toString(36).slice(2);
    const r = await http(B, "POST", "/v1/chat/completions", { body: chat(secret, { max_tokens: 4, temperature: 0 }) });
    assert(r.status === 200, `HTTP ${r.status} ${short(r.text)}`);
    const e = await http(B, "POST", "/v1/completions", { body: { model: NAME, prompt: "x", max_tokens: 0, bogus_field_ops: 1 } });
    assert(e.status === 400, `bad request: HTTP ${e.status}`);
    await waitLog(srv.log, /"POST \/v1\/completions" 400/);
    const lines = srv.log().split("\n").filter((l) => l.startsWith("glint access: "));
    const ok = lines.find((l) => l.includes('"POST /v1/chat/completions" 200'));
    assert(ok, `no access line for the chat request; lines: ${lines.slice(-5).join(" | ")}`);
    const m = / 200 (\d+\.\d+)s prompt_tokens=(\d+) cached_tokens=(\d+) completion_tokens=(\d+) id=(\S+)$/.exec(ok);
    assert(m, `line format: ${ok}`);
    assert(+m[2] === r.json.usage.prompt_tokens && +m[4] === r.json.usage.completion_tokens, `tokens ${ok} vs usage ${JSON.stringify(r.json.usage)}`);
    assert(m[5] === r.json.id, `id ${m[5]} vs ${r.json.id}`);
    assert(lines.some((l) => l.includes('"POST /v1/completions" 400')), "no line for the 400");
    assert(!srv.log().includes(secret), "the request body reached the log");
});

await check("metrics.request_histograms", async () => {
    // The engine thread observes a step's tokens when the step returns, just after the step's
    // events have completed the answers: settle before each scrape.
    await sleep(100);
    const before = (await getMetrics(B)).series;
    const sent = [
        { prompt: "one two three", max_tokens: 5, n: 1 },
        { prompt: "four five", max_tokens: 7, n: 2 },
        { prompt: "six", max_tokens: 3, n: 1 },
    ];
    let prompt = 0, gen = 0, choices = 0, computed = 0, maxTok = 0, nSum = 0, maxGen = 0;
    for (const s of sent) {
        const r = await http(B, "POST", "/v1/completions", { body: { model: NAME, temperature: 0, ignore_eos: true, ...s } });
        assert(r.status === 200, `HTTP ${r.status} ${short(r.text)}`);
        const u = r.json.usage;
        // usage counts the prompt once and every choice's tokens; vLLM's histograms count each
        // choice as a request (n > 1 fans out), and n / max_num_generation_tokens once per prompt.
        prompt += (u.prompt_tokens * s.n);
        gen += u.completion_tokens;
        choices += s.n;
        maxTok += s.max_tokens * s.n;
        nSum += s.n;
        maxGen += s.max_tokens; // ignore_eos: every choice reaches max_tokens
        computed += s.n * u.prompt_tokens + u.completion_tokens - s.n; // the last token is never computed
    }
    await sleep(100);
    const after = (await getMetrics(B)).series;
    const d = (name) => (metricValue(after, name, { model_name: NAME }) ?? NaN) - (metricValue(before, name, { model_name: NAME }) ?? 0);
    const want = {
        "vllm:request_prompt_tokens_sum": prompt, "vllm:request_prompt_tokens_count": choices,
        "vllm:request_generation_tokens_sum": gen, "vllm:request_generation_tokens_count": choices,
        "vllm:request_params_max_tokens_sum": maxTok, "vllm:request_params_max_tokens_count": choices,
        "vllm:request_params_n_sum": nSum, "vllm:request_params_n_count": sent.length,
        "vllm:request_max_num_generation_tokens_sum": maxGen, "vllm:request_max_num_generation_tokens_count": sent.length,
        "vllm:iteration_tokens_total_sum": computed,
        "vllm:request_queue_time_seconds_count": choices, "vllm:request_prefill_time_seconds_count": choices,
        "vllm:request_decode_time_seconds_count": choices, "vllm:request_inference_time_seconds_count": choices,
    };
    for (const [k, v] of Object.entries(want)) assert(d(k) === v, `${k}: +${d(k)}, want +${v}`);
    // Phases add up: inference = prefill + decode (same clock readings), each >= 0.
    const inf = d("vllm:request_inference_time_seconds_sum"), pre = d("vllm:request_prefill_time_seconds_sum"), dec = d("vllm:request_decode_time_seconds_sum");
    assert(pre >= 0 && dec >= 0 && Math.abs(inf - pre - dec) < 1e-3, `inference ${inf} vs prefill ${pre} + decode ${dec}`);
    // vLLM's buckets: 1-2-5 up to max_model_len 512 for token counts, and the +Inf bucket = count.
    const les = after.filter((s) => s.name === "vllm:request_prompt_tokens_bucket").map((s) => s.labels.le);
    assert(JSON.stringify(les) === JSON.stringify(["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "+Inf"]), `prompt_tokens buckets ${les}`);
    const iter = after.filter((s) => s.name === "vllm:iteration_tokens_total_bucket").map((s) => s.labels.le);
    assert(iter.length === 14 && iter[12] === "16384.0", `iteration buckets ${iter}`);
    const q = after.filter((s) => s.name === "vllm:request_queue_time_seconds_bucket").map((s) => s.labels.le);
    assert(q[0] === "0.3" && q[3] === "1.0" && q[20] === "7680.0" && q.length === 22, `queue buckets ${q}`);
});

await check("metrics.ttft_from_arrival", async () => {
    // A fresh schema compiles during the parse; TTFT and E2E start before it, so for this one
    // request e2e >= ttft >= the compile time.
    const before = (await getMetrics(B)).series;
    const props = {};
    for (let i = 0; i < 40; i++) props[`k${i}_${Date.now() % 1000}`] = { type: "string", maxLength: 3 + (i % 5) };
    const r = await http(B, "POST", "/v1/chat/completions", {
        body: chat("x", { max_tokens: 8, response_format: { type: "json_schema", json_schema: { name: "s", schema: { type: "object", properties: props } } } }),
    });
    assert(r.status === 200, `HTTP ${r.status} ${short(r.text)}`);
    const after = (await getMetrics(B)).series;
    const d = (name) => metricValue(after, name, { model_name: NAME }) - (metricValue(before, name, { model_name: NAME }) ?? 0);
    assert(d("glint:grammar_compile_seconds_count") === 1 && d("vllm:time_to_first_token_seconds_count") === 1, "one compile, one TTFT");
    const comp = d("glint:grammar_compile_seconds_sum"), ttft = d("vllm:time_to_first_token_seconds_sum"), e2e = d("vllm:e2e_request_latency_seconds_sum");
    assert(ttft >= comp && e2e >= ttft, `compile ${comp} s, ttft ${ttft} s, e2e ${e2e} s`);
});

await check("cors.simple_preflight_sse", async () => {
    const origin = { Origin: "http://ok.test" };
    const r = await http(B, "GET", "/v1/models", { headers: origin });
    assert(r.headers.get("access-control-allow-origin") === "http://ok.test" && r.headers.get("vary") === "Origin", `simple: ${[...r.headers]}`);
    const bad = await http(B, "GET", "/v1/models", { headers: { Origin: "http://evil.test" } });
    assert(bad.status === 200 && bad.headers.get("access-control-allow-origin") === null, "a foreign origin got CORS headers");
    const pre = await http(B, "OPTIONS", "/v1/chat/completions", { headers: { ...origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "Content-Type, X-Custom" } });
    assert(pre.status === 200 && pre.text === "OK", `preflight HTTP ${pre.status} ${pre.text}`);
    assert(pre.headers.get("access-control-allow-methods").includes("POST") && pre.headers.get("access-control-max-age") === "600", `${[...pre.headers]}`);
    assert(/x-custom/.test(pre.headers.get("access-control-allow-headers")), `allow-headers ${pre.headers.get("access-control-allow-headers")}`);
    const pre2 = await http(B, "OPTIONS", "/v1/chat/completions", { headers: { Origin: "http://evil.test", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "x-other" } });
    assert(pre2.status === 400 && pre2.text === "Disallowed CORS origin, headers", `disallowed preflight: HTTP ${pre2.status} ${pre2.text}`);
    // OPTIONS without the preflight headers is an ordinary request: 405.
    const plain = await http(B, "OPTIONS", "/v1/chat/completions");
    assert(plain.status === 405, `plain OPTIONS: ${plain.status}`);
    const s = await fetch(B + "/v1/chat/completions", { method: "POST", headers: { ...origin, "content-type": "application/json" }, body: JSON.stringify(chat("x", { max_tokens: 2, stream: true })) });
    await s.text();
    assert(s.status === 200 && s.headers.get("access-control-allow-origin") === "http://ok.test", "SSE answer without CORS headers");
    const e = await http(B, "POST", "/v1/chat/completions", { headers: origin, body: { model: "nope", messages: [] } });
    assert(e.status >= 400 && e.headers.get("access-control-allow-origin") === "http://ok.test", "error answer without CORS headers");
});
await srv.stop();

await check("cors.defaults_and_quiet_log", async () => {
    const s = await startServer({ model: MODEL, args: ["--max-model-len", "256", "--deep-health-interval", "0", "--disable-uvicorn-access-log", "--allow-credentials"] });
    try {
        const r = await http(s.base, "GET", "/v1/models", { headers: { Origin: "http://any.test" } });
        assert(r.headers.get("access-control-allow-origin") === "*" && r.headers.get("access-control-allow-credentials") === "true", `${[...r.headers]}`);
        const c = await http(s.base, "GET", "/v1/models", { headers: { Origin: "http://any.test", Cookie: "a=b" } });
        assert(c.headers.get("access-control-allow-origin") === "http://any.test", "credentials with a cookie must echo the origin");
        const pre = await http(s.base, "OPTIONS", "/v1/completions", { headers: { Origin: "http://any.test", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "x-anything" } });
        assert(pre.status === 200 && pre.headers.get("access-control-allow-headers") === "x-anything", `${pre.status} ${[...pre.headers]}`);
        await sleep(100);
        assert(!s.log().includes("glint access:"), "--disable-uvicorn-access-log still logged");
    } finally {
        await s.stop();
    }
});

await check("metrics.admission_rejections", async () => {
    const s = await startServer({ model: MODEL, args: ["--max-model-len", "512", "--deep-health-interval", "0", "--max-num-seqs", "1", "--max-waiting", "1"] });
    try {
        const rs = await Promise.all(Array.from({ length: 6 }, () =>
            http(s.base, "POST", "/v1/completions", { body: { model: MODEL, prompt: "x", max_tokens: 64, ignore_eos: true } })));
        const n503 = rs.filter((r) => r.status === 503).length;
        assert(rs.every((r) => r.status === 200 || r.status === 503), `statuses ${rs.map((r) => r.status)}`);
        const m = (await getMetrics(s.base)).series;
        const got = metricValue(m, "vllm:admission_rejections_total", { model_name: MODEL });
        assert(n503 >= 1 && got === n503, `${n503} answers 503, admission_rejections_total ${got}`);
        // The older vLLM names mirror the current ones.
        assert(metricValue(m, "vllm:gpu_cache_usage_perc", { model_name: MODEL }) === metricValue(m, "vllm:kv_cache_usage_perc", { model_name: MODEL }), "gpu_cache_usage_perc");
        assert(metricValue(m, "vllm:time_per_output_token_seconds_count", { model_name: MODEL }) === metricValue(m, "vllm:inter_token_latency_seconds_count", { model_name: MODEL }), "time_per_output_token_seconds");
    } finally {
        await s.stop();
    }
});

await check("ipv6.loopback", async () => {
    const port = await freePort();
    const proc = spawn(GLINT_BIN, ["serve", "--model", MODEL, "--host", "::1", "--port", String(port), "--max-model-len", "256", "--deep-health-interval", "0", ...SERVE_DEVICE_ARGS], { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    proc.stdout.on("data", (d) => (log += d));
    proc.stderr.on("data", (d) => (log += d));
    try {
        const base = `http://[::1]:${port}`;
        for (let i = 0; i < 200 && !log.includes(base); i++) await sleep(50);
        assert(log.includes(base), `no line naming ${base}: ${tail(log)}`);
        const r = await http(base, "POST", "/v1/completions", { body: { model: MODEL, prompt: "hi", max_tokens: 2 } });
        assert(r.status === 200, `HTTP ${r.status} ${short(r.text)}`);
        await waitLog(() => log, /glint access: ::1 "POST/);
        assert(/glint access: ::1 "POST \/v1\/completions" 200/.test(log), "access line without the IPv6 client");
    } finally {
        proc.kill("SIGKILL");
    }
});

// ---- fitting to memory ----
const fileBytes = fs.statSync(MODEL).size;
const CAP = String(fileBytes + 50000); // ~45 KB free after the weights: a few hundred positions
await check("fit.plan_and_serve_agree_default_request", async () => {
    const plan = await runGlint(["plan", "--model", MODEL], { env: { GLINT_MEM_AVAILABLE: CAP } });
    assert(plan.code === 0, `plan: ${plan.stderr}`);
    const p = JSON.parse(plan.stdout);
    assert(p.fit.max_model_len_lowered && p.max_model_len < 4096 && p.max_model_len > 16, `plan: ${short(plan.stdout, 400)}`);
    const s = await startServer({ model: MODEL, env: { GLINT_MEM_AVAILABLE: CAP }, args: ["--deep-health-interval", "0"] });
    try {
        const pool = /KV pool (\d+) bytes/.exec(s.log()), low = /max_model_len lowered from 4096 to (\d+)/.exec(s.log());
        assert(pool && low, `start-up log: ${tail(s.log(), 900)}`);
        assert(+pool[1] === p.kv_cache_memory && +low[1] === p.max_model_len, `serve ${pool[1]} B / ${low[1]} vs plan ${p.kv_cache_memory} / ${p.max_model_len}`);
        // The newcomer's first request: no max_tokens.
        const r = await http(s.base, "POST", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "Hello" }] } });
        assert(r.status === 200, `default request: HTTP ${r.status} ${short(r.text)}`);
        const u = r.json.usage;
        assert(u.prompt_tokens + u.completion_tokens <= p.max_model_len, `usage ${JSON.stringify(u)}`);
    } finally {
        await s.stop();
    }
    // Negative control: the user's --max-model-len is kept, and then the same request cannot fit.
    const s2 = await startServer({ model: MODEL, env: { GLINT_MEM_AVAILABLE: CAP }, args: ["--deep-health-interval", "0", "--max-model-len", "4096"] });
    try {
        assert(!/max_model_len lowered/.test(s2.log()), "an explicit --max-model-len was lowered");
        const r = await http(s2.base, "POST", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "Hello" }] } });
        expectError(r, 400, ["KV"]);
    } finally {
        await s2.stop();
    }
});

await check("flags.vllm_spellings", async () => {
    for (const [args, code, text] of [
        [["-tp", "2"], 2, "only 1 is supported"],
        [["--dtype", "float16"], 2, "only auto"],
        [["--gpu-memory-utilization", "1.5"], 2, "bad value"],
        [["--kv-cache-dtype", "int3"], 2, "bad value"],
        [["--host", "not-an-address"], 1, "IPv4 or IPv6"],
        [["--allowed-origins", "[1]"], 1, "--allowed-origins"],
    ]) {
        const r = await runGlint(["serve", "--model", MODEL, "--port", "0", ...args], { timeoutMs: 20000 });
        assert(r.code === code && (r.stderr + r.stdout).includes(text), `${args.join(" ")}: code ${r.code} ${short(r.stderr)}`);
    }
    const s = await startServer({
        model: MODEL,
        args: ["--deep-health-interval", "0", "--kv-cache-memory-bytes", "4MiB", "--kv-cache-dtype", "auto", "--tensor-parallel-size", "1", "--gpu-memory-utilization", "0.5",
            "--uvicorn-log-level", "warning", "--disable-log-stats", "--trust-remote-code", "--seed", "7", "--threads", "1",
            "--enable-auto-tool-choice", "--tool-call-parser", "llama4_pythonic", "--reasoning-parser", "x", "--dtype", "auto", "--enforce-eager"],
    });
    try {
        assert(/KV pool 4194304 bytes .*, given/.test(s.log()), `pool: ${tail(s.log())}`);
        assert(/1 kernel threads/.test(s.log()), "--threads 1 not taken");
        const m = (await getMetrics(s.base)).text;
        assert(/cache_dtype="f16"/.test(m), "auto is not f16");
        const r = await http(s.base, "POST", "/v1/completions", { body: { model: MODEL, prompt: "x", max_tokens: 1 } });
        assert(r.status === 200, `HTTP ${r.status}`);
        await sleep(100);
        assert(!s.log().includes("glint access:"), "--uvicorn-log-level warning still logs access lines");
    } finally {
        await s.stop();
    }
});

await check("generation_config.hf_folder", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "glint-ops-"));
    try {
        const mk = await runGlint(["make-model", "--preset", "tiny", "--format", "safetensors", "--out", path.join(dir, "m")], { timeoutMs: 60000 });
        assert(mk.code === 0, `make-model: ${mk.stderr}`);
        const gc = path.join(dir, "m", "generation_config.json");
        const g = fs.existsSync(gc) ? JSON.parse(fs.readFileSync(gc, "utf8")) : {};
        fs.writeFileSync(gc, JSON.stringify({ ...g, temperature: 0.25, top_k: 7, max_new_tokens: 3 }));
        for (const [mode, applied] of [["auto", true], ["vllm", false]]) {
            const s = await startServer({ model: path.join(dir, "m"), args: ["--deep-health-interval", "0", "--max-model-len", "256", "--generation-config", mode] });
            try {
                const said = /default sampling from .*temperature 0\.25, top_p 1, top_k 7, .*max_tokens 3/.test(s.log());
                assert(said === applied, `${mode}: log ${tail(s.log(), 500)}`);
                const r = await http(s.base, "POST", "/v1/completions", { body: { model: path.join(dir, "m"), prompt: "x", ignore_eos: true } });
                assert(r.status === 200, `HTTP ${r.status} ${short(r.text)}`);
                const n = r.json.usage.completion_tokens;
                assert(applied ? n === 3 : n > 3, `${mode}: ${n} tokens`);
            } finally {
                await s.stop();
            }
        }
        // A default over the room the prompt leaves is clipped to it (vLLM), not a 400.
        fs.writeFileSync(gc, JSON.stringify({ ...g, max_new_tokens: 100000 }));
        const s = await startServer({ model: path.join(dir, "m"), args: ["--deep-health-interval", "0", "--max-model-len", "64"] });
        try {
            const r = await http(s.base, "POST", "/v1/completions", { body: { model: path.join(dir, "m"), prompt: "x", ignore_eos: true } });
            assert(r.status === 200 && r.json.usage.prompt_tokens + r.json.usage.completion_tokens === 64, `HTTP ${r.status} ${short(r.text)}`);
        } finally {
            await s.stop();
        }
    } finally {
        fs.rmSync(dir, { recursive: true, force: true });
    }
}, 90000);

console.log(`${counts.passed} passed, ${counts.failed} failed`);
process.exit(counts.failed ? 1 : 0);
