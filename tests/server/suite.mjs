// SPDX-License-Identifier: MIT
// End-to-end suite for `glint serve` through the official `openai` npm SDK (API calls) and plain
// fetch (status codes, headers, SSE bytes, /health, /metrics, /tokenize).
//   node tests/server/suite.mjs [MODEL.gguf]     (or GLINT_MODEL=...; GLINT_BIN, default build/glint)
// Starts its own servers on free loopback ports (a main one, a short-lived one for the deep health
// probe and VLLM_API_KEY), runs the named checks in order and prints `PASS name` or
// `FAIL name: reason` for each, then `N passed, M failed`; exits 1 on any failure. Every server
// is killed when the suite ends. The model is expected to be the tiny random-weight preset
// (gibberish text by design): checks assert properties that hold for any weights (grammar
// validity, framing, determinism, counts), never particular words.
// Env: GL_SUITE_ONLY=regex runs only the matching checks (the servers still start);
// GL_SUITE_VERBOSE=1 prints each check's time.
import net from "node:net";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
    OpenAI, GLINT_BIN, startServer, runGlint, http, expectError, streamPost, parseSSE, assembleChat,
    assembleCompletion, getMetrics, metricValue, waitIdle, framingProblem, schemaValidator, sleep,
    withTimeout, short, tail, T,
} from "./lib.mjs";

const MODEL = process.argv[2] || process.env.GLINT_MODEL;
if (!MODEL) {
    console.error("usage: node tests/server/suite.mjs MODEL.gguf   (or GLINT_MODEL=...)");
    process.exit(2);
}
const SUITE_DEADLINE_MS = T(Number(process.env.GL_SUITE_DEADLINE_MS || 170000));
const NAME = "glimmer-test"; // --served-model-name
const KEY = "sk-glint-suite-" + Math.random().toString(36).slice(2, 10);
const MAX_LEN = 2048;
const MAX_BODY = 262144;
const MAX_SEQS = 4, MAX_WAITING = 4;
const ONLY = process.env.GL_SUITE_ONLY ? new RegExp(process.env.GL_SUITE_ONLY) : null;
const VERBOSE = !!process.env.GL_SUITE_VERBOSE;

let passed = 0, failed = 0;
const t0 = Date.now();
function finish() {
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}
setTimeout(() => {
    console.log(`FAIL suite.deadline: the suite ran over ${SUITE_DEADLINE_MS} ms and was stopped`);
    failed++;
    finish();
}, SUITE_DEADLINE_MS).unref();

async function check(name, fn, timeoutMs = 30000) {
    if (ONLY && !ONLY.test(name)) return;
    const t = Date.now();
    try {
        await withTimeout(Promise.resolve().then(fn), timeoutMs, "check");
        passed++;
        console.log(`PASS ${name}` + (VERBOSE ? `  (${Date.now() - t} ms)` : ""));
    } catch (e) {
        failed++;
        const msg = String(e?.message ?? e).replace(/\s*\n\s*/g, " | ");
        console.log(`FAIL ${name}: ${msg.length > 1500 ? msg.slice(0, 1500) + "..." : msg}` + (VERBOSE ? `  (${Date.now() - t} ms)` : ""));
    }
}
// Diagnostics (GL_SUITE_VERBOSE=1): what a check saw, e.g. how many runs it could judge.
function note(msg) {
    if (VERBOSE) console.log(`#   ${msg}`);
}
function assert(cond, msg) {
    if (!cond) throw new Error(msg);
}
// Short description of a request body for failure messages (tools and long text elided).
function desc(body) {
    const b = { ...body };
    if (b.tools) b.tools = b.tools.map((t) => t.function?.name);
    if (b.messages) b.messages = b.messages.map((m) => ({ ...m, content: typeof m.content === "string" && m.content.length > 60 ? m.content.slice(0, 60) + "..." : m.content }));
    if (typeof b.prompt === "string" && b.prompt.length > 80) b.prompt = b.prompt.slice(0, 80) + `...(${b.prompt.length} chars)`;
    return short(b, 500);
}
const norm = (x) => (x === undefined || x === null ? "" : x);

// ---------------------------------------------------------------------------------------------
// Fixtures
const TOOLS = [
    {
        type: "function",
        function: {
            name: "get_weather",
            description: "Current weather for a city",
            parameters: {
                type: "object",
                properties: { city: { type: "string", maxLength: 10 }, unit: { type: "string", enum: ["c", "f"] } },
                required: ["city", "unit"],
                additionalProperties: false,
            },
        },
    },
    {
        type: "function",
        function: {
            name: "lookup_stock",
            description: "Stock quote",
            parameters: {
                type: "object",
                properties: { symbol: { type: "string", pattern: "^[A-Z]{1,5}$" }, count: { type: "integer", minimum: 1, maximum: 10 } },
                required: ["symbol", "count"],
                additionalProperties: false,
            },
        },
    },
];
const TOOL_VALIDATORS = Object.fromEntries(TOOLS.map((t) => [t.function.name, schemaValidator(t.function.parameters)]));
// "noop" has no parameters (tools.no_description_no_parameters): any JSON object.
TOOL_VALIDATORS.noop = schemaValidator({ type: "object" });
const TOOL_MSGS = [{ role: "user", content: "What is the weather in Paris, and what does ACME stock cost?" }];
const MSGS = [{ role: "user", content: "Write one short sentence about the sea." }];
const SCHEMA = {
    type: "object",
    properties: {
        name: { type: "string", maxLength: 8 },
        age: { type: "integer", minimum: 0, maximum: 120 },
        tags: { type: "array", items: { enum: ["a", "b", "c"] }, maxItems: 3 },
        ok: { type: "boolean" },
    },
    required: ["name", "age", "ok"],
    additionalProperties: false,
};
const SCHEMA_V = schemaValidator(SCHEMA);
const REGEX = "[a-z]{3}-[0-9]{2,4}";
const CHOICES = ["alpha", "beta", "gamma"];
const GBNF = 'root ::= ("yes" | "no") " " [0-9] [0-9]?';
const GBNF_RE = /^(yes|no) [0-9][0-9]?$/;
const THINK = 16; // thinking_token_budget for grammar/tool checks, so reasoning cannot eat max_tokens
const SEEDS = [11, 12, 13, 14, 15, 16];

// ---------------------------------------------------------------------------------------------
let main = null, client = null, mainErr = null;
const toolNames = TOOLS.map((t) => t.function.name);

function needMain() {
    if (!main) throw new Error(`main server not running: ${mainErr?.message ?? "not started"}`);
}
const chat = (body) => client.chat.completions.create({ model: NAME, ...body });
const complete = (body) => client.completions.create({ model: NAME, ...body });
async function tokenize(body) {
    const r = await http(main.base, "POST", "/tokenize", { body: { model: NAME, ...body } });
    assert(r.status === 200, `POST /tokenize ${desc(body)}: HTTP ${r.status} ${short(r.text)}`);
    return r.json;
}
async function sdkStream(kind, body) {
    const s = await (kind === "chat" ? client.chat.completions : client.completions).create({ model: NAME, stream: true, ...body });
    const chunks = [];
    for await (const c of s) chunks.push(c);
    return chunks;
}

// Common properties of a chat reply; returns problems (strings).
function chatProblems(reply, { tools = null, allowed = null } = {}) {
    const p = [];
    if (reply?.object !== "chat.completion") p.push(`object ${short(reply?.object)} (want chat.completion)`);
    if (typeof reply?.id !== "string" || !reply.id) p.push("id missing");
    const u = reply?.usage;
    if (!u || !Number.isInteger(u.prompt_tokens) || !Number.isInteger(u.completion_tokens) || u.total_tokens !== u.prompt_tokens + u.completion_tokens)
        p.push(`usage inconsistent: ${short(u)}`);
    if (!Array.isArray(reply?.choices) || !reply.choices.length) {
        p.push("no choices");
        return p;
    }
    for (const c of reply.choices) {
        const m = c.message ?? {};
        const tag = `choice ${c.index}`;
        if (m.role !== "assistant") p.push(`${tag}: role ${short(m.role)}`);
        if (norm(m.reasoning) !== norm(m.reasoning_content)) p.push(`${tag}: reasoning ${short(m.reasoning, 80)} != reasoning_content ${short(m.reasoning_content, 80)}`);
        for (const f of ["content", "reasoning", "reasoning_content"]) {
            const fp = framingProblem(m[f]);
            if (fp) p.push(`${tag}: ${f}: ${fp}`);
            for (const n of toolNames) if (typeof m[f] === "string" && m[f].includes(`to=${n}`)) p.push(`${tag}: ${f} contains header text to=${n}`);
        }
        if (!["stop", "length", "tool_calls"].includes(c.finish_reason)) p.push(`${tag}: finish_reason ${short(c.finish_reason)}`);
        const calls = m.tool_calls ?? [];
        if (!tools && calls.length) p.push(`${tag}: tool_calls without tools: ${short(calls)}`);
        if (c.finish_reason === "tool_calls" && !calls.length) p.push(`${tag}: finish_reason tool_calls but no tool_calls`);
        if (calls.length && c.finish_reason === "stop") p.push(`${tag}: tool_calls present but finish_reason stop`);
        if (c.finish_reason === "tool_calls")
            for (const tc of calls) {
                const tp = toolCallProblem(tc, allowed);
                if (tp) p.push(`${tag}: ${tp}`);
            }
    }
    return p;
}
function toolCallProblem(tc, allowed) {
    if (typeof tc.id !== "string" || !tc.id) return `tool call without id: ${short(tc)}`;
    if (tc.type !== "function") return `tool call type ${short(tc.type)}: ${short(tc)}`;
    const name = tc.function?.name;
    if (!TOOL_VALIDATORS[name]) return `tool call to unknown function ${short(name)}`;
    if (allowed && !allowed.includes(name)) return `tool call to ${name}, only ${allowed.join(",")} allowed`;
    if (framingProblem(tc.function.arguments)) return `arguments: ${framingProblem(tc.function.arguments)}`;
    let args;
    try {
        args = JSON.parse(tc.function.arguments);
    } catch (e) {
        return `${name} arguments are not JSON: ${short(tc.function.arguments)}`;
    }
    const bad = TOOL_VALIDATORS[name](args);
    return bad ? `${name} arguments ${short(tc.function.arguments)} invalid: ${bad}` : null;
}
function mustBeClean(reply, body, opts) {
    const p = chatProblems(reply, opts);
    if (p.length) throw new Error(`request ${desc(body)}: ${p.join("; ")}`);
}

// Runs BODY with each seed; validates every finish_reason "stop" content with VALIDATE (returns
// null or a reason). Requires at least MINSTOP stop replies. Returns the replies.
async function structuredRuns(body, validate, { seeds = SEEDS, minStop = 1, maxTokens = 128 } = {}) {
    const outs = [];
    let stops = 0, reasonBound = 0;
    for (const seed of seeds) {
        const req = { messages: MSGS, temperature: 1, seed, max_tokens: maxTokens, thinking_token_budget: THINK, ...body };
        const r = await chat(req);
        mustBeClean(r, req);
        const c = r.choices[0];
        if (c.finish_reason === "stop") {
            stops++;
            const why = validate(c.message.content ?? "");
            if (why) throw new Error(`request ${desc(req)}: finish_reason stop but content ${short(c.message.content)} is invalid: ${why}`);
        } else if (!norm(c.message.content)) reasonBound++;
        outs.push(r);
    }
    note(`${desc(body).slice(0, 80)}: finish ${outs.map((o) => o.choices[0].finish_reason).join(",")}`);
    if (stops < minStop)
        throw new Error(`${desc(body)}: ${stops} of ${seeds.length} seeds finished with "stop" (want >= ${minStop}); ${reasonBound} ended with empty content (reasoning ran to max_tokens: thinking_token_budget ${THINK} not enforced?); finish_reasons ${short(outs.map((o) => o.choices[0].finish_reason))}`);
    return outs;
}
const jsonValidator = (v) => (s) => {
    let d;
    try {
        d = JSON.parse(s);
    } catch (e) {
        return "not JSON: " + e.message;
    }
    return v(d);
};
const isObjectJSON = (s) => {
    try {
        const d = JSON.parse(s);
        return d && typeof d === "object" && !Array.isArray(d) ? null : "not a JSON object";
    } catch (e) {
        return "not JSON: " + e.message;
    }
};
const fullMatch = (re) => (s) => (new RegExp(`^(?:${re})$`, "u").test(s) ? null : `does not fully match /${re}/`);
const inChoices = (s) => (CHOICES.includes(s) ? null : `not one of ${CHOICES.join(",")}`);

function errOf(e) {
    const cause = e?.cause ? ` (cause: ${e.cause.code ?? ""} ${e.cause.message ?? e.cause})` : "";
    return `${e?.constructor?.name} status ${e?.status} ${short(e?.error ?? e?.message)}${cause}`;
}

// ---------------------------------------------------------------------------------------------
async function main_() {
    console.log(`# glint serve suite: ${GLINT_BIN}, model ${MODEL}`);

    // ---- CLI ----
    await check("cli.serve_help", async () => {
        const r = await runGlint(["serve", "--help"], { timeoutMs: 15000 });
        const out = r.stdout + r.stderr;
        assert(r.code === 0, `glint serve --help: exit ${r.code}, want 0; output ${tail(out, 300)}`);
        for (const f of ["--port", "--host", "--api-key", "--max-model-len", "--served-model-name"]) assert(out.includes(f), `glint serve --help does not mention ${f}: ${tail(out, 300)}`);
    });
    await check("cli.unknown_flag_exit2", async () => {
        const r = await runGlint(["serve", "--model", MODEL, "--port", "1", "--no-such-flag-xyz"], { timeoutMs: 20000 });
        assert(r.code === 2, `glint serve --no-such-flag-xyz: exit ${r.code} (signal ${r.signal}), want 2; stderr ${tail(r.stderr, 300)}`);
        assert(r.stderr.includes("--no-such-flag-xyz"), `stderr does not name the flag: ${tail(r.stderr, 300)}`);
    });

    await check("cli.structured_outputs_config_bad_key", async () => {
        const r = await runGlint(["serve", "--model", MODEL, "--port", "1", "--structured-outputs-config", '{"backend":"xgrammar","nosuch_key":true}'], { timeoutMs: 20000 });
        assert(r.code !== 0, `a bad --structured-outputs-config started: exit ${r.code}`);
        assert(r.stderr.includes("nosuch_key"), `stderr does not name the key: ${tail(r.stderr, 300)}`);
    });

    // ---- start the servers: deep-health/env-key server and the main one, loading in parallel ----
    const deepP = startServer({ model: MODEL, args: ["--threads", "1", "--deep-health-interval", "5", "--served-model-name", NAME, "--strict-request-fields"], env: { VLLM_API_KEY: "env-key-123" }, waitHealthy: false }).then(
        (s) => ({ s }),
        (e) => ({ e }),
    );
    // Media parts: a root the server may read, a valid 1x1 PNG inside it and one outside it.
    const mediaDir = fs.mkdtempSync(path.join(os.tmpdir(), "glint-media-"));
    const mediaRoot = path.join(mediaDir, "root");
    fs.mkdirSync(mediaRoot);
    const png1 = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==", "base64");
    fs.writeFileSync(path.join(mediaRoot, "ok.png"), png1);
    fs.writeFileSync(path.join(mediaDir, "outside.png"), png1);
    fs.symlinkSync(path.join(mediaDir, "outside.png"), path.join(mediaRoot, "escape.png"));
    process.on("exit", () => fs.rmSync(mediaDir, { recursive: true, force: true }));
    const mainArgs = [
        "--allowed-local-media-path", mediaRoot,
        "--api-key", KEY, "--served-model-name", NAME, "--max-model-len", String(MAX_LEN), "--max-num-seqs", String(MAX_SEQS),
        "--max-waiting", String(MAX_WAITING), "--max-body-bytes", String(MAX_BODY), "--threads", "2", "--shutdown-timeout", "30",
        "--enable-prefix-caching", "--generation-config", "vllm",
        // The deep probe is a real generation that shows in the running/pages gauges and token
        // counters; it has its own server above, so it is off here for exact metric deltas.
        "--deep-health-interval", "0",
    ];
    const mainP = startServer({ model: MODEL, args: mainArgs, env: { VLLM_API_KEY: "" } }).then(
        (s) => ({ s }),
        (e) => ({ e }),
    );

    // ---- deep health probe + VLLM_API_KEY ----
    const deep = await deepP;
    await check("health.deep_pending_then_ok", async () => {
        if (deep.e) throw deep.e;
        const base = deep.s.base;
        const seen = [];
        const tEnd = Date.now() + 40000;
        for (;;) {
            const r = await http(base, "GET", "/health?deep=1");
            const st = r.json?.status;
            if (!seen.length || seen[seen.length - 1].status !== st) seen.push({ status: st, http: r.status, body: r.text.slice(0, 200) });
            if (st === "ok") {
                assert(r.status === 200, `/health?deep=1 status ok but HTTP ${r.status}`);
                assert(typeof r.json.age_s === "number" && r.json.age_s >= 0 && r.json.age_s <= 10, `age_s ${short(r.json.age_s)} not in [0, 2 intervals = 10]`);
                break;
            }
            assert(st === "pending", `/health?deep=1 status ${short(st)} (HTTP ${r.status}, body ${short(r.text, 200)}), want pending then ok`);
            if (Date.now() > tEnd) throw new Error(`/health?deep=1 never reached ok in 40 s with --deep-health-interval 5: ${short(seen)}`);
            await sleep(250);
        }
        assert(seen[0].status === "pending", `first /health?deep=1 answer was ${short(seen[0])}, want status pending before the first probe`);
        const h = await http(base, "GET", "/health");
        assert(h.status === 200, `plain /health: HTTP ${h.status}`);
    }, 50000);
    await check("auth.env_VLLM_API_KEY", async () => {
        if (deep.e) throw deep.e;
        const a = await http(deep.s.base, "GET", "/v1/models");
        assert(a.status === 401, `VLLM_API_KEY=env-key-123, GET /v1/models without key: HTTP ${a.status}, want 401`);
        const b = await http(deep.s.base, "GET", "/v1/models", { key: "env-key-123" });
        assert(b.status === 200, `GET /v1/models with the env key: HTTP ${b.status} ${short(b.text)}, want 200`);
    });
    await check("fields.strict_request_fields_400", async () => {
        if (deep.e) throw deep.e;
        const r = await http(deep.s.base, "POST", "/v1/chat/completions", { key: "env-key-123", body: { model: NAME, messages: MSGS, max_tokens: 2, store: false } });
        expectError(r, 400, ["store", "--strict-request-fields"], "store under --strict-request-fields: ");
    });
    if (deep.s) await deep.s.stop();

    // ---- engine flags, and /health 503 while the model loads ----
    await check("cli.engine_flags_and_health_503_while_loading", async () => {
        const args = ["--served-model-name", "flags", "--kv-cache-dtype", "bf16", "--kv-cache-memory", String(64 << 20), "--max-num-batched-tokens", "64",
            "--no-enable-prefix-caching", "--no-framing-grammar", "--generation-config", "auto", "--max-model-len", "1024", "--deep-health-interval", "0", "--threads", "2"];
        const s = await startServer({ model: MODEL, args, env: { VLLM_API_KEY: "" }, pollWhileLoading: true });
        try {
            const lh = s.loadingHealth;
            assert(lh.length >= 1 && lh.every((x) => x === 503), `GET /health before the serving line: ${short(lh)}; want at least one answer, all 503`);
            const prompt = "A prompt long enough to need several prefill chunks of 64 tokens: " + "river stone ".repeat(60);
            const r = await http(s.base, "POST", "/v1/completions", { body: { model: "flags", prompt, max_tokens: 8, ignore_eos: true } });
            assert(r.status === 200 && r.json?.usage?.completion_tokens === 8, `serve ${args.join(" ")}: completion HTTP ${r.status} ${short(r.text)}`);
            const c = await http(s.base, "POST", "/v1/chat/completions", { body: { model: "flags", messages: MSGS, max_tokens: 8 } });
            assert(c.status === 200 && c.json?.choices?.[0]?.message, `--no-framing-grammar chat: HTTP ${c.status} ${short(c.text)}`);
        } finally {
            await s.stop();
        }
    }, 60000);

    const m = await mainP;
    if (m.e) mainErr = m.e;
    else {
        main = m.s;
        client = new OpenAI({ baseURL: `${main.base}/v1`, apiKey: KEY, timeout: T(60000), maxRetries: 0 });
    }
    await check("startup.ready", async () => {
        needMain();
        assert(main.urlLine && main.urlLine.includes(main.base), `no line naming ${main.base}`);
    });
    if (!main) {
        if (ONLY && !ONLY.test("startup.ready")) {
            failed++;
            console.log(`FAIL startup.ready: ${mainErr.message}`);
        }
        console.log("# the main server did not start; the remaining checks were not run");
        finish();
    }

    // ---- health, version, models, auth ----
    await check("health.ok_ping", async () => {
        for (const p of ["/health", "/ping"]) {
            const r = await http(main.base, "GET", p);
            assert(r.status === 200, `GET ${p} without key: HTTP ${r.status} ${short(r.text)}, want 200`);
        }
    });
    await check("version", async () => {
        const r = await http(main.base, "GET", "/version");
        assert(r.status === 200 && typeof r.json?.version === "string" && r.json.version.length > 0, `GET /version: HTTP ${r.status} ${short(r.text)}, want {"version": "..."}`);
    });
    await check("models.list_sdk", async () => {
        const raw = await http(main.base, "GET", "/v1/models", { key: KEY });
        assert((raw.headers.get("content-type") || "").startsWith("application/json") && raw.json?.object === "list", `GET /v1/models: content-type ${raw.headers.get("content-type")}, body ${short(raw.text)}; want application/json, object list`);
        const page = await client.models.list();
        const d = page.data;
        assert(Array.isArray(d) && d.length === 1, `models.list(): ${short(d)}, want one model`);
        assert(d[0].id === NAME && d[0].object === "model", `model card ${short(d[0])}, want id ${NAME}, object model`);
        if ("max_model_len" in d[0]) assert(d[0].max_model_len === MAX_LEN, `max_model_len ${d[0].max_model_len}, want ${MAX_LEN}`);
    });
    await check("auth.missing_key_401", async () => {
        for (const [meth, p, body] of [["POST", "/v1/chat/completions", { model: NAME, messages: MSGS, max_tokens: 4 }], ["POST", "/v1/completions", { model: NAME, prompt: "x", max_tokens: 2 }], ["GET", "/v1/models"]]) {
            const r = await http(main.base, meth, p, { body });
            expectError(r, 401, [], `${meth} ${p} without Authorization: `);
        }
    });
    await check("auth.bad_key_401_sdk", async () => {
        const bad = new OpenAI({ baseURL: `${main.base}/v1`, apiKey: "sk-wrong", maxRetries: 0, timeout: T(20000) });
        try {
            await bad.chat.completions.create({ model: NAME, messages: MSGS, max_tokens: 4 });
        } catch (e) {
            assert(e instanceof OpenAI.AuthenticationError && e.status === 401, `wrong key: got ${errOf(e)}, want AuthenticationError 401`);
            return;
        }
        throw new Error("wrong key: request succeeded, want 401");
    });
    await check("auth.unguarded_paths", async () => {
        for (const [meth, p, body] of [["GET", "/health"], ["GET", "/ping"], ["GET", "/metrics"], ["GET", "/version"], ["POST", "/tokenize", { prompt: "hi" }]]) {
            const r = await http(main.base, meth, p, { body });
            assert(r.status === 200, `${meth} ${p} without key: HTTP ${r.status} ${short(r.text)}, want 200 (only /v1/* is guarded)`);
        }
    });

    // ---- tokenize / detokenize ----
    await check("tokenize.prompt", async () => {
        const a = await tokenize({ prompt: "Hello world, glint!", return_token_strs: true });
        assert(Number.isInteger(a.count) && a.count === a.tokens?.length, `count ${a.count} vs tokens ${short(a.tokens)}`);
        assert(a.max_model_len === MAX_LEN, `max_model_len ${a.max_model_len}, want ${MAX_LEN}`);
        assert(Array.isArray(a.token_strs) && a.token_strs.length === a.count, `token_strs ${short(a.token_strs)} (want ${a.count} strings)`);
        const b = await tokenize({ prompt: "Hello world, glint!", add_special_tokens: false });
        assert(a.tokens[0] === 200000 && JSON.stringify(a.tokens.slice(1)) === JSON.stringify(b.tokens), `add_special_tokens true ${short(a.tokens)} should be [200000 (BOS)] + add_special_tokens false ${short(b.tokens)}`);
        assert(!("token_strs" in b) || b.token_strs == null, `token_strs present without return_token_strs: ${short(b)}`);
    });
    await check("tokenize.messages", async () => {
        const a = await tokenize({ messages: MSGS });
        assert(a.count === a.tokens.length && a.count > 10, `count ${a.count} tokens ${short(a.tokens)}`);
        assert(a.tokens[0] === 200000, `chat prompt should start with BOS 200000: ${short(a.tokens.slice(0, 5))}`);
        assert(a.tokens.includes(200022) && a.tokens.includes(200023) && a.tokens.includes(200008), `chat prompt lacks <|start|>/<|message|>/<|eot|> ids: ${short(a.tokens)}`);
        assert(a.tokens[a.tokens.length - 1] !== 200008, `chat prompt should end with the generation prompt <|start|>assistant, ends ${short(a.tokens.slice(-3))}`);
    });
    await check("detokenize.roundtrip", async () => {
        const text = "Grüße, 世界! 123 naïve café 🙂";
        const a = await tokenize({ prompt: text, add_special_tokens: false });
        const r = await http(main.base, "POST", "/detokenize", { body: { model: NAME, tokens: a.tokens } });
        assert(r.status === 200 && r.json?.prompt === text, `POST /detokenize ${short(a.tokens)}: HTTP ${r.status} ${short(r.text)}, want prompt ${JSON.stringify(text)}`);
    });

    // ---- completions ----
    const P = "Once upon a time, in a quiet village,";
    await check("completions.basic_sdk", async () => {
        const req = { prompt: P, max_tokens: 16, temperature: 0 };
        const r = await complete(req);
        assert(r.object === "text_completion" && typeof r.id === "string", `${desc(req)}: object ${r.object} id ${r.id}`);
        const c = r.choices?.[0];
        assert(r.choices.length === 1 && c.index === 0 && typeof c.text === "string", `${desc(req)}: choices ${short(r.choices)}`);
        assert(["stop", "length"].includes(c.finish_reason), `finish_reason ${c.finish_reason}`);
        const u = r.usage;
        assert(u.completion_tokens >= 1 && u.completion_tokens <= 16 && u.total_tokens === u.prompt_tokens + u.completion_tokens, `usage ${short(u)}`);
        assert(c.finish_reason !== "length" || u.completion_tokens === 16, `finish length with ${u.completion_tokens} tokens of max 16`);
    });
    await check("completions.max_tokens_length", async () => {
        for (const n of [1, 12]) {
            const req = { prompt: P, max_tokens: n, temperature: 1, seed: 5, ignore_eos: true };
            const r = await complete(req);
            assert(r.choices[0].finish_reason === "length" && r.usage.completion_tokens === n, `${desc(req)}: finish_reason ${r.choices[0].finish_reason}, completion_tokens ${r.usage.completion_tokens}; want length, ${n}`);
        }
    });
    await check("completions.usage_prompt_tokens_eq_tokenize", async () => {
        const t = await tokenize({ prompt: P });
        const r = await complete({ prompt: P, max_tokens: 2 });
        assert(r.usage.prompt_tokens === t.count, `usage.prompt_tokens ${r.usage.prompt_tokens} != /tokenize count ${t.count} for ${JSON.stringify(P)}`);
    });
    await check("completions.prompt_forms", async () => {
        const t1 = await tokenize({ prompt: P });
        const t2 = await tokenize({ prompt: "The sea" });
        const g = { max_tokens: 8, temperature: 0, ignore_eos: true };
        const s = await complete({ prompt: P, ...g });
        const ids = await complete({ prompt: t1.tokens, ...g });
        assert(ids.usage.prompt_tokens === t1.count, `token-id prompt: prompt_tokens ${ids.usage.prompt_tokens}, want ${t1.count} (ids used verbatim)`);
        assert(ids.choices[0].text === s.choices[0].text, `greedy from token ids ${short(ids.choices[0].text)} != from string ${short(s.choices[0].text)}`);
        const list = await complete({ prompt: [P, "The sea"], ...g });
        assert(list.choices.length === 2 && list.choices.map((c) => c.index).sort().join() === "0,1", `list of strings: choices ${short(list.choices)}`);
        assert(list.choices.find((c) => c.index === 0).text === s.choices[0].text, `list prompt 0 text differs from the single-prompt run`);
        assert(list.usage.prompt_tokens === t1.count + t2.count, `list prompt_tokens ${list.usage.prompt_tokens}, want ${t1.count}+${t2.count}`);
        const ll = await complete({ prompt: [t1.tokens, t2.tokens], ...g });
        assert(ll.choices.length === 2 && ll.choices.find((c) => c.index === 1).text === list.choices.find((c) => c.index === 1).text, `list of token lists: ${short(ll.choices)} vs ${short(list.choices)}`);
    });
    await check("completions.echo", async () => {
        const g = { prompt: P, max_tokens: 8, temperature: 0, ignore_eos: true };
        const a = await complete(g);
        const b = await complete({ ...g, echo: true });
        assert(b.choices[0].text === P + a.choices[0].text, `echo: text ${short(b.choices[0].text)}, want prompt + ${short(a.choices[0].text)}`);
    });
    await check("completions.n2", async () => {
        const req = { prompt: P, max_tokens: 8, temperature: 1, n: 2, ignore_eos: true };
        const r = await complete(req);
        assert(r.choices.length === 2 && r.choices.map((c) => c.index).sort().join() === "0,1", `${desc(req)}: choices ${short(r.choices)}`);
        assert(r.choices[0].text !== r.choices[1].text, `n=2 at temperature 1 gave two identical texts ${short(r.choices[0].text)}`);
        assert(r.usage.completion_tokens === 16, `usage.completion_tokens ${r.usage.completion_tokens}, want 16 (2 x 8)`);
    });
    await check("completions.seed_determinism", async () => {
        const g = { prompt: P, max_tokens: 16, temperature: 1, seed: 1234, ignore_eos: true };
        const a = await complete(g), b = await complete(g), c = await complete({ ...g, seed: 4321 });
        assert(a.choices[0].text === b.choices[0].text, `same seed twice: ${short(a.choices[0].text)} vs ${short(b.choices[0].text)}`);
        assert(a.choices[0].text !== c.choices[0].text, `seeds 1234 and 4321 gave the same text ${short(a.choices[0].text)}`);
    });
    await check("completions.determinism_in_batch", async () => {
        const reqs = [0, 1, 2, 3].map((i) => ({ prompt: ["Alpha beta", P, "x", "A longer prompt about rivers and mountains and the sky"][i], max_tokens: 24, temperature: 1, top_p: 0.9, top_k: 50, seed: 100 + i, ignore_eos: true }));
        const solo = [];
        for (const q of reqs) solo.push((await complete(q)).choices[0].text);
        const together = await Promise.all(reqs.map((q) => complete(q)));
        for (let i = 0; i < 4; i++) assert(together[i].choices[0].text === solo[i], `${desc(reqs[i])}: alone ${short(solo[i])}, batched with 3 others ${short(together[i].choices[0].text)}`);
    });
    await check("completions.stream_eq_nonstream_sdk", async () => {
        const g = { prompt: P, max_tokens: 24, temperature: 1, seed: 77 };
        const a = await complete(g);
        const chunks = await sdkStream("completions", { ...g, stream_options: { include_usage: true } });
        const s = assembleCompletion(chunks);
        assert(s.choices.length === 1 && s.choices[0].text === a.choices[0].text, `streamed text ${short(s.choices[0]?.text)} != non-streamed ${short(a.choices[0].text)}`);
        assert(s.choices[0].finish_reason === a.choices[0].finish_reason, `finish_reason streamed ${s.choices[0].finish_reason} vs ${a.choices[0].finish_reason}`);
        const last = chunks[chunks.length - 1];
        assert(last && Array.isArray(last.choices) && last.choices.length === 0 && last.usage, `last chunk should have choices [] and usage: ${short(last)}`);
        assert(JSON.stringify(pickUsage(last.usage)) === JSON.stringify(pickUsage(a.usage)), `stream usage ${short(last.usage)} != ${short(a.usage)}`);
        assert(chunks.every((c) => c.object === "text_completion"), `chunk object: ${short(chunks.map((c) => c.object))}`);
    });
    await check("completions.logprobs", async () => {
        const req = { prompt: P, max_tokens: 6, temperature: 1, seed: 9, ignore_eos: true, logprobs: 3 };
        const r = await complete(req);
        const lp = r.choices[0].logprobs;
        assert(lp && Array.isArray(lp.tokens) && lp.tokens.length === 6, `${desc(req)}: logprobs.tokens ${short(lp)} (want 6)`);
        assert(lp.token_logprobs.length === 6 && lp.token_logprobs.every((x) => typeof x === "number" && x <= 0 && x > -1e6), `token_logprobs ${short(lp.token_logprobs)}`);
        assert(lp.top_logprobs.length === 6 && lp.top_logprobs.every((d) => d && Object.keys(d).length >= 3 && Object.keys(d).length <= 4 && Object.values(d).every((x) => x <= 0)), `top_logprobs ${short(lp.top_logprobs)} (want 3-4 entries each, all <= 0)`);
        assert(lp.text_offset.length === 6 && lp.text_offset.every((x, i) => Number.isInteger(x) && (i === 0 || x >= lp.text_offset[i - 1])), `text_offset ${short(lp.text_offset)}`);
        for (let i = 0; i < 6; i++) {
            const top = Math.max(...Object.values(lp.top_logprobs[i]));
            assert(top >= lp.token_logprobs[i] - 1e-3, `position ${i}: best top_logprob ${top} < sampled token logprob ${lp.token_logprobs[i]}`);
        }
    });
    await check("completions.logit_bias", async () => {
        const d = await http(main.base, "POST", "/detokenize", { body: { tokens: [1000, 1000, 1000, 1000, 1000] } });
        const req = { prompt: P, max_tokens: 5, temperature: 1, seed: 3, ignore_eos: true, logit_bias: { 1000: 100 } };
        const r = await complete(req);
        assert(r.choices[0].text === d.json?.prompt, `${desc(req)}: text ${short(r.choices[0].text)}, want detokenize([1000]*5) = ${short(d.json?.prompt)}`);
    });
    await check("completions.stop_token_ids_min_tokens", async () => {
        const req = { prompt: P, max_tokens: 10, temperature: 1, seed: 3, logit_bias: { 1000: 100 }, stop_token_ids: [1000] };
        const r = await complete(req);
        const c = r.choices[0];
        assert(c.finish_reason === "stop" && c.stop_reason === 1000 && r.usage.completion_tokens === 1, `${desc(req)}: finish ${c.finish_reason} stop_reason ${short(c.stop_reason)} completion_tokens ${r.usage.completion_tokens}; want stop, 1000, 1`);
        const req2 = { ...req, min_tokens: 4 };
        const r2 = await complete(req2);
        const c2 = r2.choices[0];
        assert(c2.finish_reason === "stop" && c2.stop_reason === 1000 && r2.usage.completion_tokens === 5, `${desc(req2)}: finish ${c2.finish_reason} stop_reason ${short(c2.stop_reason)} completion_tokens ${r2.usage.completion_tokens}; want stop, 1000, 5 (stop id masked for the first 4)`);
    });
    await check("completions.stop_strings", async () => {
        const base = { prompt: P, max_tokens: 32, temperature: 1, seed: 21, ignore_eos: true };
        const T = (await complete(base)).choices[0].text;
        const stop = pickStop(T, "");
        assert(stop, `could not pick a stop string from ${short(T)}`);
        const k = T.indexOf(stop);
        const a = await complete({ ...base, stop });
        const ca = a.choices[0];
        assert(ca.text === T.slice(0, k) && ca.finish_reason === "stop" && ca.stop_reason === stop, `stop ${JSON.stringify(stop)}: text ${short(ca.text)} finish ${ca.finish_reason} stop_reason ${short(ca.stop_reason)}; want ${short(T.slice(0, k))}, stop, ${JSON.stringify(stop)}`);
        const b = await complete({ ...base, stop: ["\u0001never\u0002", stop], include_stop_str_in_output: true });
        const cb = b.choices[0];
        assert(cb.text === T.slice(0, k + stop.length) && cb.finish_reason === "stop" && cb.stop_reason === stop, `stop list + include_stop_str_in_output: text ${short(cb.text)} finish ${cb.finish_reason}; want ${short(T.slice(0, k + stop.length))}, stop`);
    });
    await check("completions.sampling_fields_accepted", async () => {
        const req = { prompt: P, max_tokens: 8, temperature: 0.7, top_p: 0.9, top_k: 40, min_p: 0.01, presence_penalty: 0.5, frequency_penalty: 0.5, repetition_penalty: 1.1, seed: 5, user: "suite", skip_special_tokens: false, n: 1 };
        const r = await complete(req);
        assert(r.choices.length === 1 && r.usage.completion_tokens >= 1, `${desc(req)}: ${short(r)}`);
    });
    await check("completions.guided_choice", async () => {
        for (const seed of [1, 2]) {
            const req = { prompt: P, max_tokens: 16, temperature: 1, seed, structured_outputs: { choice: CHOICES } };
            const r = await complete(req);
            const c = r.choices[0];
            assert(c.finish_reason === "stop" && CHOICES.includes(c.text), `${desc(req)}: text ${short(c.text)} finish ${c.finish_reason}; want one of ${CHOICES}, stop`);
        }
    });

    // ---- chat ----
    await check("chat.basic_sdk", async () => {
        const req = { messages: MSGS, max_tokens: 32, temperature: 1, seed: 1 };
        const r = await chat(req);
        mustBeClean(r, req);
        assert(r.choices.length === 1 && ["stop", "length"].includes(r.choices[0].finish_reason), `${desc(req)}: ${short(r.choices)}`);
        assert(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 32, `usage ${short(r.usage)}`);
    });
    await check("chat.usage_prompt_tokens_eq_tokenize", async () => {
        const t = await tokenize({ messages: MSGS });
        const r = await chat({ messages: MSGS, max_tokens: 2 });
        assert(r.usage.prompt_tokens === t.count, `chat usage.prompt_tokens ${r.usage.prompt_tokens} != /tokenize {messages} count ${t.count}`);
    });
    await check("chat.max_tokens_length", async () => {
        for (const f of [{ max_tokens: 10 }, { max_completion_tokens: 7 }]) {
            const req = { messages: MSGS, temperature: 1, seed: 2, ...f };
            const r = await chat(req);
            mustBeClean(r, req);
            const n = f.max_tokens ?? f.max_completion_tokens;
            assert(r.choices[0].finish_reason === "length" && r.usage.completion_tokens === n, `${desc(req)}: finish ${r.choices[0].finish_reason}, completion_tokens ${r.usage.completion_tokens}; want length, ${n}`);
        }
    });
    await check("chat.sse_raw_eq_nonstream", async () => {
        const req = { model: NAME, messages: MSGS, max_tokens: 40, temperature: 1, seed: 31 };
        const a = await chat(req);
        mustBeClean(a, req);
        const s = await streamPost(main.base, "/v1/chat/completions", { ...req, stream: true, stream_options: { include_usage: true } }, { key: KEY });
        assert(s.status === 200, `stream: HTTP ${s.status} ${short(s.text)}`);
        assert((s.headers.get("content-type") || "").startsWith("text/event-stream"), `content-type ${s.headers.get("content-type")}`);
        assert(!s.sse.problems.length, `SSE framing: ${s.sse.problems.join("; ")}`);
        const chunks = s.sse.chunks;
        assert(chunks.every((c) => c.object === "chat.completion.chunk"), `chunk objects ${short([...new Set(chunks.map((c) => c.object))])}`);
        assert(chunks[0]?.choices?.[0]?.delta?.role === "assistant", `first chunk delta has no role assistant: ${short(chunks[0])}`);
        const last = chunks[chunks.length - 1];
        assert(last.choices?.length === 0 && last.usage, `last chunk should be choices [] + usage: ${short(last)}`);
        const x = assembleChat(chunks);
        assert(!x.problems.length, x.problems.join("; "));
        const c = x.choices[0], m = a.choices[0].message;
        assert(c.content === norm(m.content) && c.reasoning === norm(m.reasoning), `streamed content/reasoning ${short([c.content, c.reasoning])} != non-streamed ${short([m.content, m.reasoning])}`);
        assert(c.reasoning === c.reasoning_content, `streamed reasoning ${short(c.reasoning)} != reasoning_content ${short(c.reasoning_content)}`);
        assert(c.finish_reason === a.choices[0].finish_reason, `finish_reason streamed ${c.finish_reason} vs ${a.choices[0].finish_reason}`);
        assert(JSON.stringify(pickUsage(last.usage)) === JSON.stringify(pickUsage(a.usage)), `usage streamed ${short(last.usage)} vs ${short(a.usage)}`);
        for (const ch of chunks) for (const cc of ch.choices) for (const f of ["content", "reasoning", "reasoning_content"]) assert(!framingProblem(cc.delta?.[f]), `delta.${f}: ${framingProblem(cc.delta?.[f])}`);
    });
    await check("chat.stream_sdk_eq_nonstream", async () => {
        const req = { messages: MSGS, max_tokens: 40, temperature: 0.8, top_k: 100, seed: 32, skip_special_tokens: false };
        const a = await chat(req);
        mustBeClean(a, req);
        const x = assembleChat(await sdkStream("chat", req));
        const c = x.choices[0], m = a.choices[0].message;
        assert(c.role === "assistant" && c.content === norm(m.content) && c.reasoning === norm(m.reasoning) && c.finish_reason === a.choices[0].finish_reason, `${desc(req)} streamed ${short([c.content, c.reasoning, c.finish_reason])} != non-streamed ${short([m.content, m.reasoning, a.choices[0].finish_reason])}`);
    });
    await check("chat.no_framing_skip_special_false", async () => {
        for (const seed of [41, 42, 43]) {
            const req = { messages: MSGS, max_tokens: 48, temperature: 1, seed, skip_special_tokens: false };
            mustBeClean(await chat(req), req);
        }
        const req = { model: NAME, messages: MSGS, max_tokens: 48, temperature: 1, seed: 44, skip_special_tokens: false, stream: true };
        const s = await streamPost(main.base, "/v1/chat/completions", req, { key: KEY });
        assert(s.status === 200 && !s.sse.problems.length, `stream: HTTP ${s.status} ${s.sse?.problems.join("; ")}`);
        const x = assembleChat(s.sse.chunks).choices[0];
        for (const f of ["content", "reasoning"]) assert(!framingProblem(x[f]), `streamed ${f}: ${framingProblem(x[f])}`);
    });
    await check("chat.n2", async () => {
        const req = { messages: MSGS, max_tokens: 16, temperature: 1, n: 2 };
        const r = await chat(req);
        mustBeClean(r, req);
        assert(r.choices.length === 2 && r.choices.map((c) => c.index).sort().join() === "0,1", `${desc(req)}: choice indexes ${short(r.choices.map((c) => c.index))}`);
        const t = r.choices.map((c) => norm(c.message.reasoning) + "|" + norm(c.message.content));
        assert(t[0] !== t[1], `n=2 at temperature 1 gave identical choices ${short(t[0])}`);
        const x = assembleChat(await sdkStream("chat", { ...req, seed: 8 }));
        assert(x.choices.length === 2 && x.choices.every((c) => c.finish_reason), `streamed n=2: ${short(x.choices.map((c) => [c.index, c.finish_reason]))}`);
    });
    await check("chat.logprobs", async () => {
        const req = { messages: MSGS, max_tokens: 8, temperature: 1, seed: 3, logprobs: true, top_logprobs: 3 };
        const r = await chat(req);
        mustBeClean(r, req);
        const lp = r.choices[0].logprobs?.content;
        assert(Array.isArray(lp) && lp.length >= 1 && lp.length <= r.usage.completion_tokens, `${desc(req)}: logprobs.content ${short(lp)} (want 1..${r.usage.completion_tokens} entries)`);
        for (const e of lp) {
            assert(typeof e.token === "string" && typeof e.logprob === "number" && e.logprob <= 0 && Array.isArray(e.bytes) && e.bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256), `entry ${short(e)}`);
            assert(Array.isArray(e.top_logprobs) && e.top_logprobs.length === 3 && e.top_logprobs.every((t) => typeof t.token === "string" && t.logprob <= 0 && Array.isArray(t.bytes)), `top_logprobs ${short(e.top_logprobs)} (want 3)`);
            assert(e.top_logprobs.every((t, i) => i === 0 || t.logprob <= e.top_logprobs[i - 1].logprob + 1e-6), `top_logprobs not sorted: ${short(e.top_logprobs)}`);
            if (!e.token.includes("\ufffd")) assert(Buffer.from(e.bytes).toString("utf8") === e.token, `bytes ${short(e.bytes)} do not spell token ${JSON.stringify(e.token)}`);
        }
        const x = assembleChat(await sdkStream("chat", req)).choices[0];
        assert(x.logprobs.length === lp.length && x.logprobs.every((e, i) => e.token === lp[i].token), `streamed logprobs tokens ${short(x.logprobs.map((e) => e.token))} != ${short(lp.map((e) => e.token))}`);
    });
    await check("chat.stop_strings", async () => {
        // Stop strings end the answer (content); the stop string is taken from the content of
        // the same request without stop, and must not occur in its reasoning.
        let done = false;
        for (const seed of [51, 52, 53, 54, 55, 56]) {
            const base = { messages: MSGS, max_tokens: 48, temperature: 1, seed, thinking_token_budget: 8 };
            const a = await chat(base);
            mustBeClean(a, base);
            const R = norm(a.choices[0].message.reasoning), C = norm(a.choices[0].message.content);
            const stop = pickStop(C, R + " to=self to=user assistant");
            if (!stop) continue;
            const k = C.indexOf(stop);
            for (const include of [false, true]) {
                const req = { ...base, stop: include ? [stop] : stop, include_stop_str_in_output: include };
                const b = await chat(req);
                mustBeClean(b, req);
                const c = b.choices[0], mm = c.message;
                const want = C.slice(0, k + (include ? stop.length : 0));
                assert(c.finish_reason === "stop" && c.stop_reason === stop && norm(mm.content) === want, `${desc(req)} (stop taken from the content of the run without stop, ${short(C)}): finish ${c.finish_reason}, stop_reason ${short(c.stop_reason)}, content ${short(mm.content)}; want stop, ${JSON.stringify(stop)}, ${short(want)}`);
                assert(norm(mm.reasoning) === R, `reasoning changed by the stop string: ${short(mm.reasoning)} vs ${short(R)}`);
                if (!include) assert(!norm(mm.content).includes(stop), `stop string appears in the content: ${short(mm.content)}`);
            }
            const x = assembleChat(await sdkStream("chat", { ...base, stop }));
            assert(x.choices[0].content === C.slice(0, k) && x.choices[0].finish_reason === "stop", `streamed with stop ${JSON.stringify(stop)}: content ${short(x.choices[0].content)} finish ${x.choices[0].finish_reason}; want ${short(C.slice(0, k))}, stop`);
            done = true;
            break;
        }
        assert(done, "no seed of 6 produced answer text to take a stop string from (thinking_token_budget 8, max_tokens 48)");
    });
    await check("chat.reasoning_effort_and_kwargs", async () => {
        for (const extra of [{ reasoning_effort: "low" }, { chat_template_kwargs: { reasoning_strength: "medium" } }, { reasoning_effort: "high", thinking_token_budget: 8 }]) {
            const req = { messages: MSGS, max_tokens: 16, temperature: 1, seed: 4, ...extra };
            mustBeClean(await chat(req), req);
        }
        const lo = await tokenize({ messages: MSGS, chat_template_kwargs: { reasoning_strength: "low" }, return_token_strs: true });
        assert(lo.token_strs.join("").includes("Reasoning strength: low."), `/tokenize with chat_template_kwargs.reasoning_strength low: rendered prompt lacks "Reasoning strength: low.": ${short(lo.token_strs.join(""), 400)}`);
    });
    await check("chat.thinking_token_budget", async () => {
        // The random model rarely opens a reasoning message on its own: bias it towards the
        // "=self" header token, which then also fills the reasoning body, so only the budget
        // can close it. Token ids (return_token_ids) count the body exactly: the tokens between
        // the first <|message|> (200023) and <|eom|> (200007).
        const t = await tokenize({ prompt: "=self", add_special_tokens: false });
        assert(t.count === 1, `"=self" is ${t.count} tokens, want 1`);
        const self = t.tokens[0];
        for (const budget of [8, 3]) {
            const req = { messages: MSGS, max_tokens: 64, temperature: 1, seed: 61, thinking_token_budget: budget, logit_bias: { [self]: 30 }, return_token_ids: true };
            const r = await chat(req);
            mustBeClean(r, req);
            const ids = r.choices[0].token_ids;
            const open = ids.indexOf(200023), close = ids.indexOf(200007);
            assert(ids[1] === self && open === 2 && close > open, `${desc(req)}: no reasoning message in ${short(ids.slice(0, 16))}`);
            assert(close - open - 1 === budget, `${desc(req)}: reasoning body is ${close - open - 1} tokens, want exactly the budget ${budget}`);
            assert(norm(r.choices[0].message.reasoning).length > 0, `${desc(req)}: empty reasoning field`);
            assert(ids.slice(close + 1, close + 4).join() === `200022,140680,${ids[0]}`, `${desc(req)}: after <|eom|> ${short(ids.slice(close, close + 5))}, want <|start|>assistant to`);
        }
    });
    await check("chat.answer_room", async () => {
        // Issue 19: the reasoning must leave room for the answer. "=self" is biased up (as in
        // chat.thinking_token_budget) so that, given room, the random model opens a reasoning
        // message; with max_tokens 10 the default budget (5) plus its framing used to eat every
        // token (content "", finish_reason length). Now the turn's shortest answer (framing +
        // shortest choice + stop: at most 9 tokens for these words, one token per byte at worst)
        // keeps the reasoning shut, and every reply is one of the choices.
        const t = await tokenize({ prompt: "=self", add_special_tokens: false });
        const bias = { [t.tokens[0]]: 30 };
        const so = { choice: CHOICES };
        for (const seed of [91, 92, 93]) {
            const req = { messages: MSGS, max_tokens: 10, temperature: 1, seed, logit_bias: bias, structured_outputs: so };
            const r = await chat(req);
            const c = r.choices[0];
            assert(CHOICES.includes(c.message.content) && c.finish_reason === "stop", `${desc(req)}: content ${short(c.message.content)}, finish_reason ${c.finish_reason}; want one of ${CHOICES} and stop`);
        }
        // Control: with room, the same bias does open a reasoning message (so the check above
        // would have failed had the reasoning not been kept shut).
        const roomy = { messages: MSGS, max_tokens: 40, temperature: 1, seed: 91, logit_bias: bias, structured_outputs: so, return_token_ids: true };
        const rr = await chat(roomy);
        assert(rr.choices[0].token_ids[1] === t.tokens[0] && norm(rr.choices[0].message.reasoning).length > 0, `${desc(roomy)}: no reasoning message with room: ${short(rr.choices[0].token_ids.slice(0, 8))}`);
        assert(CHOICES.includes(rr.choices[0].message.content), `${desc(roomy)}: content ${short(rr.choices[0].message.content)}`);
        // Too small to hold even the shortest answer: a 400 naming max_tokens and the count; that
        // count itself is accepted (it is a lower bound, never above what an answer needs).
        const tiny = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 2, structured_outputs: so } });
        expectError(tiny, 400, ["max_tokens"], "max_tokens 2 with a choice");
        const need = Number(/at least (\d+) tokens/.exec(tiny.json?.error?.message ?? "")?.[1]);
        assert(need > 2 && need <= 9, `max_tokens 2: message ${short(tiny.json?.error?.message)} does not give a needed count in 3..9`);
        const fits = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: need, structured_outputs: so } });
        assert(fits.status === 200, `max_tokens ${need} (the count the 400 named): HTTP ${fits.status} ${short(fits.text)}`);
        const bad = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 16, structured_outputs: { ...so, finish_within_max_tokens: 1 } } });
        expectError(bad, 400, ["structured_outputs.finish_within_max_tokens"], "finish_within_max_tokens: 1");
    });
    await check("chat.finish_within_max_tokens", async () => {
        // A long extraction (strings without a length bound) in 40 tokens: with the flag every
        // reply ends as valid JSON with "stop"; without it (the control) the same seeds run out.
        const schema = {
            type: "object", additionalProperties: false, required: ["items"],
            properties: { items: { type: "array", minItems: 2, items: { type: "object", additionalProperties: false, required: ["name", "note", "qty"], properties: { name: { type: "string" }, note: { type: "string" }, qty: { type: "integer", minimum: 1 } } } } },
        };
        const v = jsonValidator(schemaValidator(schema));
        let cut = 0;
        for (const seed of [95, 96, 97]) {
            for (const on of [true, false]) {
                const req = { messages: MSGS, max_tokens: 40, temperature: 1, seed, structured_outputs: { json: schema, finish_within_max_tokens: on } };
                const c = (await chat(req)).choices[0];
                if (on) {
                    assert(c.finish_reason === "stop", `${desc(req)}: finish_reason ${c.finish_reason}, content ${short(c.message.content)}`);
                    const why = v(c.message.content ?? "");
                    assert(!why, `${desc(req)}: content ${short(c.message.content)} invalid: ${why}`);
                } else if (c.finish_reason === "length" || v(c.message.content ?? "")) {
                    cut++;
                }
            }
        }
        assert(cut >= 2, `control: without finish_within_max_tokens only ${cut} of 3 replies were cut or invalid (the schema is not long enough to test the flag)`);
    });
    await check("chat.determinism_in_batch", async () => {
        const reqs = [
            { messages: MSGS, max_tokens: 24, temperature: 1, seed: 201 },
            { messages: MSGS, max_tokens: 48, temperature: 1, seed: 202, thinking_token_budget: THINK, response_format: { type: "json_schema", json_schema: { name: "p", schema: SCHEMA } } },
            { messages: TOOL_MSGS, tools: TOOLS, tool_choice: "required", max_tokens: 64, temperature: 1, seed: 203, thinking_token_budget: THINK },
            { messages: MSGS, max_tokens: 24, temperature: 0.9, top_p: 0.95, seed: 204, n: 2 },
        ];
        const key = (r) => JSON.stringify(r.choices.map((c) => [c.message.content, c.message.reasoning, (c.message.tool_calls ?? []).map((t) => [t.function.name, t.function.arguments]), c.finish_reason]));
        const solo = [];
        for (const q of reqs) solo.push(key(await chat(q)));
        const together = await Promise.all(reqs.map((q) => chat(q)));
        for (let i = 0; i < reqs.length; i++) assert(key(together[i]) === solo[i], `${desc(reqs[i])}: alone ${short(solo[i])}, batched with ${reqs.length - 1} others ${short(key(together[i]))}`);
    }, 60000);
    await check("chat.tool_result_turn", async () => {
        const req = {
            messages: [
                ...TOOL_MSGS,
                { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Paris", "unit": "c"}' } }] },
                { role: "tool", tool_call_id: "call_1", content: "18C, cloudy" },
            ],
            tools: TOOLS, tool_choice: "none", max_tokens: 16, temperature: 1, seed: 5,
        };
        const r = await chat(req);
        mustBeClean(r, { ...req, messages: "(tool turn)" }, { tools: TOOLS });
        assert(!r.choices[0].message.tool_calls?.length, `tool_choice none produced tool_calls ${short(r.choices[0].message.tool_calls)}`);
        const t = await tokenize({ messages: req.messages, tools: TOOLS, return_token_strs: true });
        const txt = t.token_strs.join("");
        assert(txt.includes('<atem:parameter name="city">Paris</atem:parameter>') && txt.includes("18C, cloudy"), `rendered tool turn lacks the decoded call or the tool output: ${short(txt.slice(-400), 420)}`);
    });

    // ---- tools ----
    const toolRuns = async (extra, { seeds = [71, 72, 73, 74], allowed = null, stream = false } = {}) => {
        const out = [];
        for (const seed of seeds) {
            const req = { messages: TOOL_MSGS, tools: TOOLS, temperature: 1, seed, max_tokens: 256, thinking_token_budget: THINK, ...extra };
            const r = await chat(req);
            mustBeClean(r, req, { tools: TOOLS, allowed });
            out.push({ req, r, c: r.choices[0], calls: r.choices[0].message.tool_calls ?? [] });
        }
        note(`tools ${short(extra.tool_choice)}: ${out.map((x) => `${x.c.finish_reason}/${x.calls.length} calls`).join(", ")}`);
        return out;
    };
    await check("tools.required", async () => {
        const runs = await toolRuns({ tool_choice: "required" });
        for (const { req, c, calls } of runs) assert((c.finish_reason === "tool_calls" && calls.length >= 1) || c.finish_reason === "length", `${desc(req)}: finish ${c.finish_reason} with ${calls.length} calls; want tool_calls (or length)`);
        const n = runs.filter((x) => x.c.finish_reason === "tool_calls").length;
        assert(n >= 1, `no run of 4 produced a tool call (finish ${short(runs.map((x) => x.c.finish_reason))})`);
    }, 60000);
    await check("tools.named", async () => {
        const runs = await toolRuns({ tool_choice: { type: "function", function: { name: "lookup_stock" } } }, { allowed: ["lookup_stock"] });
        for (const { req, c, calls } of runs) {
            assert(c.finish_reason === "tool_calls" || c.finish_reason === "length", `${desc(req)}: finish ${c.finish_reason}`);
            for (const tc of calls) assert(tc.function.name === "lookup_stock", `named lookup_stock but called ${tc.function.name}`);
        }
        assert(runs.some((x) => x.c.finish_reason === "tool_calls"), `no run produced a tool call (finish ${short(runs.map((x) => x.c.finish_reason))})`);
    }, 60000);
    await check("tools.auto", async () => {
        const runs = await toolRuns({ tool_choice: "auto" }, { seeds: [81, 82, 83, 84] });
        for (const { req, c, calls } of runs) assert(c.finish_reason !== "tool_calls" || calls.length >= 1, `${desc(req)}: finish tool_calls without calls`);
    }, 60000);
    await check("tools.none", async () => {
        const runs = await toolRuns({ tool_choice: "none", max_tokens: 48 }, { seeds: [91, 92, 93] });
        for (const { req, c, calls } of runs) assert(!calls.length && c.finish_reason !== "tool_calls", `${desc(req)}: tool_choice none gave ${calls.length} calls, finish ${c.finish_reason}`);
    }, 60000);
    await check("tools.parallel_false", async () => {
        const runs = await toolRuns({ tool_choice: "required", parallel_tool_calls: false }, { seeds: [75, 76, 77] });
        for (const { req, calls } of runs) assert(calls.length <= 1, `${desc(req)}: ${calls.length} tool calls with parallel_tool_calls false`);
    }, 60000);
    // The SDK's zodFunction sends no description, and a tool may have no parameters: vLLM serves
    // both (None, printed null by the template; tests/oracle/chat_corpus has the renders), so glint
    // must too, with every call's arguments valid for its schema.
    await check("tools.no_description_no_parameters", async () => {
        const tools = [
            { type: "function", function: { name: TOOLS[0].function.name, parameters: TOOLS[0].function.parameters } },
            { type: "function", function: { name: "noop" } },
        ];
        let calls = 0;
        for (const seed of [75, 76, 77]) {
            const req = { messages: TOOL_MSGS, tools, tool_choice: "required", temperature: 1, seed, max_tokens: 128, thinking_token_budget: THINK };
            const r = await chat(req);
            mustBeClean(r, req, { tools });
            calls += r.choices[0].message.tool_calls?.length ?? 0;
        }
        assert(calls >= 1, "tool_choice required produced no call in 3 runs");
    }, 60000);
    await check("tools.stream_eq_nonstream", async () => {
        for (const tool_choice of ["required", { type: "function", function: { name: "get_weather" } }]) {
            const req = { messages: TOOL_MSGS, tools: TOOLS, tool_choice, temperature: 1, seed: 72, max_tokens: 256, thinking_token_budget: THINK };
            const a = await chat(req);
            mustBeClean(a, req, { tools: TOOLS });
            const x = assembleChat(await sdkStream("chat", req));
            const c = x.choices[0];
            const want = (a.choices[0].message.tool_calls ?? []).map((t) => [t.function.name, JSON.parse(t.function.arguments)]);
            let got;
            try {
                got = c.tool_calls.map((t) => [t.function.name, JSON.parse(t.function.arguments)]);
            } catch (e) {
                throw new Error(`${desc(req)}: streamed tool call arguments are not JSON: ${short(c.tool_calls)}`);
            }
            assert(c.role === "assistant", `first delta role ${short(c.role)}`);
            assert(c.finish_reason === a.choices[0].finish_reason && JSON.stringify(got) === JSON.stringify(want), `${desc(req)}: streamed ${short([c.finish_reason, got])} != non-streamed ${short([a.choices[0].finish_reason, want])}`);
            for (const t of c.tool_calls) if (c.finish_reason === "tool_calls") assert(t.id && t.type === "function", `streamed call lacks id/type: ${short(t)}`);
        }
    }, 60000);
    await check("tools.unknown_named_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: TOOL_MSGS, tools: TOOLS, tool_choice: { type: "function", function: { name: "no_such_tool" } }, max_tokens: 8 } });
        expectError(r, 400, ["no_such_tool"], "named tool_choice not in tools: ");
    });

    // ---- structured outputs ----
    await check("structured.response_format_json_schema", () => structuredRuns({ response_format: { type: "json_schema", json_schema: { name: "person", schema: SCHEMA, strict: true } } }, jsonValidator(SCHEMA_V)), 60000);
    await check("structured.response_format_json_object", async () => {
        const outs = await structuredRuns({ response_format: { type: "json_object" } }, isObjectJSON, { minStop: 0, seeds: SEEDS.slice(0, 4) });
        for (const o of outs) {
            const c = norm(o.choices[0].message.content);
            assert(!c || /^\s*\{/.test(c), `json_object content does not start with '{': ${short(c)}`);
        }
    }, 60000);
    await check("structured.structured_outputs_json", () => structuredRuns({ structured_outputs: { json: SCHEMA } }, jsonValidator(SCHEMA_V)), 60000);
    await check("structured.structured_outputs_regex", () => structuredRuns({ structured_outputs: { regex: REGEX } }, fullMatch(REGEX)), 60000);
    await check("structured.structured_outputs_choice", () => structuredRuns({ structured_outputs: { choice: CHOICES } }, inChoices), 60000);
    await check("structured.structured_outputs_grammar", () => structuredRuns({ structured_outputs: { grammar: GBNF } }, (s) => (GBNF_RE.test(s) ? null : `does not match ${GBNF_RE}`)), 60000);
    await check("structured.structured_outputs_json_object", () => structuredRuns({ structured_outputs: { json_object: true } }, isObjectJSON, { minStop: 0, seeds: SEEDS.slice(0, 3) }), 60000);
    await check("structured.guided_json", () => structuredRuns({ guided_json: SCHEMA }, jsonValidator(SCHEMA_V)), 60000);
    await check("structured.guided_regex", () => structuredRuns({ guided_regex: REGEX }, fullMatch(REGEX)), 60000);
    await check("structured.guided_choice", () => structuredRuns({ guided_choice: CHOICES }, inChoices), 60000);
    await check("structured.guided_grammar", () => structuredRuns({ guided_grammar: GBNF }, (s) => (GBNF_RE.test(s) ? null : `does not match ${GBNF_RE}`)), 60000);
    await check("structured.stream_json_schema", async () => {
        const req = { messages: MSGS, temperature: 1, max_tokens: 128, thinking_token_budget: THINK, response_format: { type: "json_schema", json_schema: { name: "p", schema: SCHEMA } } };
        let stops = 0;
        for (const seed of SEEDS.slice(0, 4)) {
            const x = assembleChat(await sdkStream("chat", { ...req, seed })).choices[0];
            for (const f of ["content", "reasoning"]) assert(!framingProblem(x[f]), `streamed ${f}: ${framingProblem(x[f])}`);
            if (x.finish_reason === "stop") {
                stops++;
                const why = jsonValidator(SCHEMA_V)(x.content);
                assert(!why, `seed ${seed}: streamed stop content ${short(x.content)} invalid: ${why}`);
            }
        }
        assert(stops >= 1, "no streamed run finished with stop");
    }, 60000);
    for (const skip of [true, false])
        await check(`structured.reasoning_json_skip_special_${skip}`, async () => {
            const outs = await structuredRuns({ reasoning_effort: "high", chat_template_kwargs: { reasoning_strength: "high" }, skip_special_tokens: skip, response_format: { type: "json_schema", json_schema: { name: "p", schema: SCHEMA, strict: true } } }, jsonValidator(SCHEMA_V));
            assert(outs.every((o) => norm(o.choices[0].message.reasoning) === norm(o.choices[0].message.reasoning_content)), "reasoning != reasoning_content");
        }, 60000);
    await check("structured.bad_schema_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "nosuchtype" } } } } } } });
        expectError(r, 400, ["type", "/properties/a"], "schema with type nosuchtype: ");
    });
    await check("structured.unsupported_keyword_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, structured_outputs: { json: { type: "object", properties: { tags: { type: "array", items: { type: "object", properties: { k: { type: "integer" } } }, uniqueItems: true } } } } } });
        expectError(r, 400, ["uniqueItems", "/properties/tags"], "schema with uniqueItems: ");
    });
    await check("structured.lenient_keywords_header", async () => {
        // lenient_keywords drops what the grammar cannot enforce and names it, in a header and
        // never silently; without the option the same schema is the 400 above (the control).
        const json = { type: "object", properties: { tags: { type: "array", items: { type: "object", properties: { k: { type: "integer" } } }, uniqueItems: true } } };
        const H = "x-glint-unenforced-keywords";
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, structured_outputs: { json, lenient_keywords: true } } });
        assert(r.status === 200, `lenient: status ${r.status}: ${tail(r.text, 300)}`);
        assert((r.headers.get(H) || "").includes("uniqueItems at /properties/tags"), `lenient: header ${H} = ${r.headers.get(H)}`);
        const s = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, stream: true, structured_outputs: { json, lenient_keywords: true } } });
        assert(s.status === 200 && (s.headers.get(H) || "").includes("uniqueItems"), `lenient stream: status ${s.status}, header ${s.headers.get(H)}`);
        const c = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, structured_outputs: { json: { type: "object", properties: { a: { type: "string" } } }, disable_additional_properties: false, whitespace_pattern: "[ \t\n\r]*" } } });
        assert(c.status === 200 && c.headers.get(H) === null, `full semantics: status ${c.status}, header ${c.headers.get(H)}: ${tail(c.text, 200)}`);
        const w = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, structured_outputs: { json: { type: "object" }, whitespace_pattern: "[ ]+" } } });
        expectError(w, 400, ["whitespace_pattern"], "whitespace_pattern that refuses compact JSON: ");
    });
    await check("structured.bad_regex_and_grammar_400", async () => {
        const a = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, structured_outputs: { regex: "a(b" } } });
        expectError(a, 400, [], "regex 'a(b': ");
        const b = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 8, guided_grammar: "root ::= undefined-rule" } });
        expectError(b, 400, ["undefined-rule"], "GBNF with an undefined rule: ");
    });

    // ---- errors ----
    // vLLM ignores extra fields with a warning: hosted-platform fields and unknown ones are
    // answered 200, named in X-Glint-Ignored-Fields (streamed too) and the log; fields that would
    // change the output are a 400 naming them unless they hold their neutral value.
    await check("fields.ignored_named_and_output_changing_refused", async () => {
        const extra = { store: false, metadata: { run: "x" }, service_tier: "auto", prompt_cache_key: "k", safety_identifier: "s", nosuch_field_xyz: 1 };
        for (const stream of [false, true]) {
            const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 2, stream, ...extra } });
            assert(r.status === 200, `stream ${stream}: HTTP ${r.status} ${short(r.text)}`);
            const h = r.headers.get("x-glint-ignored-fields") ?? "";
            for (const k of Object.keys(extra)) assert(h.split(", ").includes(k), `stream ${stream}: X-Glint-Ignored-Fields ${short(h)} lacks ${k}`);
        }
        const plain = await http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt: "x", max_tokens: 2 } });
        assert(plain.status === 200 && !plain.headers.get("x-glint-ignored-fields"), `a request with only known fields got X-Glint-Ignored-Fields ${short(plain.headers.get("x-glint-ignored-fields"))}`);
        // Refused by name: not implemented (audio output, hosted search), or vLLM's own 400
        // (priority without --scheduling-policy priority).
        for (const [k, v, ep, why] of [["priority", 3, "chat", "Priority scheduling is not enabled"], ["modalities", ["text", "audio"], "chat", "only \"text\""], ["web_search_options", {}, "chat", "hosted tool"]]) {
            const body = ep === "chat" ? { model: NAME, messages: MSGS, max_tokens: 2, [k]: v } : { model: NAME, prompt: "x", max_tokens: 2, [k]: v };
            const r = await http(main.base, "POST", ep === "chat" ? "/v1/chat/completions" : "/v1/completions", { key: KEY, body });
            expectError(r, 400, [k, why], `${k}: ${short(v)}: `);
        }
    });
    // vLLM's request ids: X-Request-Id (echoed back) or the body's request_id become the id's
    // suffix; one that could not be echoed safely is a 400 naming it.
    await check("fields.request_id", async () => {
        const a = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, headers: { "x-request-id": "trace-42.a_b:c" }, body: { model: NAME, messages: MSGS, max_tokens: 2 } });
        assert(a.status === 200 && a.json?.id === "chatcmpl-trace-42.a_b:c", `X-Request-Id: HTTP ${a.status} id ${short(a.json?.id)}`);
        assert(a.headers.get("x-request-id") === "trace-42.a_b:c", `X-Request-Id not echoed: ${short(a.headers.get("x-request-id"))}`);
        const b = await http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt: "x", max_tokens: 2, request_id: "job7" } });
        assert(b.status === 200 && b.json?.id === "cmpl-job7", `request_id: HTTP ${b.status} id ${short(b.json?.id)}`);
        const c = await http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt: "x", max_tokens: 2, request_id: "a b" } });
        expectError(c, 400, ["request_id"], "request_id with a space: ");
        const d = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, headers: { "x-request-id": "x".repeat(37) }, body: { model: NAME, messages: MSGS, max_tokens: 2 } });
        expectError(d, 400, ["X-Request-Id"], "a 37-character X-Request-Id: ");
        assert(!d.headers.get("x-request-id"), "an invalid X-Request-Id was echoed");
    });
    await check("error.validation_400_sdk", async () => {
        try {
            await chat({ messages: MSGS, max_tokens: 4, temperature: -1 });
        } catch (e) {
            assert(e instanceof OpenAI.BadRequestError && e.status === 400 && /temperature/i.test(`${e.error?.param} ${e.error?.message ?? e.message}`), `temperature -1: got ${errOf(e)}, want BadRequestError 400 naming temperature`);
            return;
        }
        throw new Error("temperature -1 accepted");
    });
    await check("error.missing_messages_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, max_tokens: 4 } });
        expectError(r, 400, ["messages"], "no messages: ");
    });
    await check("error.bad_json_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, rawBody: '{"model": "x", "messages": [', headers: { "content-type": "application/json" } });
        expectError(r, 400, [], "malformed JSON body: ");
    });
    await check("error.completions_unsupported_400", async () => {
        for (const [f, v] of [["suffix", "tail"], ["best_of", 2], ["use_beam_search", true]]) {
            const r = await http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt: P, max_tokens: 4, [f]: v } });
            expectError(r, 400, [f], `completions with ${f}=${JSON.stringify(v)}: `);
        }
    });
    await check("error.context_length_400", async () => {
        const prompt = "hello ".repeat(MAX_LEN + 200);
        const t = await tokenize({ prompt });
        const r = await http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt, max_tokens: 4 } });
        const e = expectError(r, 400, [`maximum context length is ${MAX_LEN} tokens`], `completions prompt of ${t.count} tokens: `);
        assert(e.message.includes(String(t.count)), `message does not give the prompt length ${t.count}: ${short(e.message)}`);
        const m = [{ role: "user", content: prompt }];
        const tc = await tokenize({ messages: m });
        const r2 = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: m, max_tokens: 4 } });
        const e2 = expectError(r2, 400, [`maximum context length is ${MAX_LEN} tokens`], `chat prompt of ${tc.count} tokens: `);
        assert(e2.message.includes(String(tc.count)), `chat message does not give the prompt length ${tc.count}: ${short(e2.message)}`);
    });
    await check("error.unknown_model_404", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: "no-such-model", messages: MSGS, max_tokens: 4 } });
        expectError(r, 404, ["no-such-model"], "chat with model no-such-model: ");
        try {
            await client.completions.create({ model: "no-such-model", prompt: "x", max_tokens: 2 });
        } catch (e) {
            assert(e instanceof OpenAI.NotFoundError && e.status === 404, `SDK completions with an unknown model: ${errOf(e)}, want NotFoundError 404`);
            return;
        }
        throw new Error("completions with model no-such-model succeeded");
    });
    await check("error.method_405", async () => {
        for (const p of ["/v1/chat/completions", "/v1/completions"]) {
            const r = await http(main.base, "GET", p, { key: KEY });
            expectError(r, 405, [], `GET ${p}: `);
        }
    });
    await check("error.body_413", async () => {
        const body = JSON.stringify({ model: NAME, prompt: "x".repeat(MAX_BODY + 50000), max_tokens: 2 });
        const r = await rawPost(main.port, "/v1/completions", body, KEY);
        assert(r.status === 413, `POST of ${body.length} bytes with --max-body-bytes ${MAX_BODY}: ${r.status ? "HTTP " + r.status + " " + short(r.text) : "no response (" + r.error + ")"}, want 413`);
        const h = await http(main.base, "GET", "/health");
        assert(h.status === 200, `server unhealthy after the 413: ${h.status}`);
    });
    await check("error.stream_options_without_stream_400", async () => {
        const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, messages: MSGS, max_tokens: 4, stream_options: { include_usage: true } } });
        expectError(r, 400, ["stream"], "stream_options without stream: ");
    });
    // Image parts: each malformed one is a 400 naming messages[i].content[j].image_url and what is
    // wrong; a well-formed one is refused by this text-only model (tests/server/vision.mjs serves images).
    const imgCases = [
        ["truncated_png", "data:image/png;base64,iVBORw0KGgo=", /trunc|end|short/i],
        ["not_an_image", "data:image/png;base64,aGVsbG8gd29ybGQh", /not a png or jpeg|format|image/i],
        ["bad_base64", "data:image/png;base64,iVBOR*0KGgo=", /base64/i],
        ["remote_url", "http://127.0.0.1:9/cat.png", /remote/i],
        ["relative_path", "cat.png", /absolute|scheme/i],
        ["outside_root", path.join(mediaDir, "outside.png"), /outside/i],
        ["symlink_escape", path.join(mediaRoot, "escape.png"), /outside/i],
        ["dotdot_escape", mediaRoot + "/../outside.png", /outside/i],
        ["valid_data_url", "data:image/png;base64," + png1.toString("base64"), /no vision tower/i],
        ["valid_local_file", "file://" + path.join(mediaRoot, "ok.png"), /no vision tower/i],
    ];
    await check("error.mm_processor_kwargs_400", async () => {
        for (const [kw, what] of [[{ max_image_tokens: 0 }, "max_image_tokens"], [{ max_image_tokens: "9" }, "max_image_tokens"], [{ max_pixels: 5 }, "max_pixels"], [7, "expected an object"]]) {
            const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, max_tokens: 4, messages: MSGS, mm_processor_kwargs: kw } });
            expectError(r, 400, ["mm_processor_kwargs", what], `${JSON.stringify(kw)}: `);
        }
        const ok = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, max_tokens: 2, messages: MSGS, mm_processor_kwargs: { max_image_tokens: 256 } } });
        assert(ok.status === 200, `a valid mm_processor_kwargs: HTTP ${ok.status} ${short(ok.text)}`);
    });
    for (const [name, url, why] of imgCases)
        await check(`error.image_${name}_400`, async () => {
            const r = await http(main.base, "POST", "/v1/chat/completions", { key: KEY, body: { model: NAME, max_tokens: 4, messages: [{ role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image_url", image_url: { url } }] }] } });
            const e = expectError(r, 400, ["messages[0].content[1].image_url"], `${name}: `);
            assert(why.test(e.message), `${name}: message should match ${why}: ${short(e.message)}`);
        });
    await check("error.unknown_path_404", async () => {
        const r = await http(main.base, "GET", "/v1/no/such/path", { key: KEY });
        assert(r.status === 404, `GET /v1/no/such/path: HTTP ${r.status}, want 404`);
    });

    // ---- metrics ----
    await check("metrics.names", async () => {
        await chat({ messages: MSGS, max_tokens: 8, response_format: { type: "json_object" } });
        const { text, series, headers } = await getMetrics(main.base);
        assert((headers.get("content-type") || "").startsWith("text/plain"), `content-type ${headers.get("content-type")}`);
        const bad = series.filter((s) => !s.name);
        assert(!bad.length, `unparsable metric lines: ${short(bad.slice(0, 3))}`);
        const want = ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total", "vllm:num_preemptions_total", "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "glint:kv_pages_held_by_requests"];
        const hist = ["vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds", "glint:grammar_compile_seconds", "glint:grammar_mask_seconds"];
        for (const h of hist) want.push(h + "_bucket", h + "_sum", h + "_count");
        const missing = want.filter((n) => metricValue(series, n, { model_name: NAME }) === undefined);
        const names = [...new Set(series.map((s) => s.name))];
        const near = (n) => names.filter((x) => x !== n && x.startsWith(n.replace(/_(bucket|sum|count|total)$/, "")));
        assert(!missing.length, `missing (with model_name="${NAME}"): ${missing.map((n) => n + (near(n).length ? ` (found ${near(n).join(", ")})` : "")).join(", ")}`);
        for (const h of hist) {
            const b = series.filter((s) => s.name === h + "_bucket" && s.labels.model_name === NAME);
            const inf = b.find((s) => s.labels.le === "+Inf");
            assert(inf && inf.value === metricValue(series, h + "_count", { model_name: NAME }), `${h}: +Inf bucket ${inf?.value} != _count`);
            const sorted = b.filter((s) => s.labels.le !== "+Inf").sort((x, y) => Number(x.labels.le) - Number(y.labels.le));
            assert(sorted.every((s, i) => i === 0 || s.value >= sorted[i - 1].value), `${h}: buckets not cumulative`);
        }
        const kv = metricValue(series, "vllm:kv_cache_usage_perc", { model_name: NAME });
        assert(kv >= 0 && kv <= 1, `kv_cache_usage_perc ${kv} not in [0,1]`);
        for (const h of ["vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds", "glint:grammar_mask_seconds"]) assert(metricValue(series, h + "_count", { model_name: NAME }) > 0, `${h}_count is 0 after requests`);
        assert(/vllm:request_success_total\{[^}]*finished_reason="(stop|length)"/.test(text), "request_success_total has no finished_reason label");
    });
    await check("metrics.counters_track_usage", async () => {
        await waitIdle(main.base, NAME, 5000);
        const before = (await getMetrics(main.base)).series;
        const r = await complete({ prompt: P + " counters", max_tokens: 9, ignore_eos: true, seed: 1 });
        await sleep(100);
        const after = (await getMetrics(main.base)).series;
        const d = (n, l = {}) => metricValue(after, n, { model_name: NAME, ...l }) - (metricValue(before, n, { model_name: NAME, ...l }) ?? 0);
        assert(d("vllm:prompt_tokens_total") === r.usage.prompt_tokens, `prompt_tokens_total grew ${d("vllm:prompt_tokens_total")}, usage.prompt_tokens ${r.usage.prompt_tokens}`);
        assert(d("vllm:generation_tokens_total") === 9, `generation_tokens_total grew ${d("vllm:generation_tokens_total")}, want 9`);
        assert(d("vllm:request_success_total", { finished_reason: "length" }) === 1, `request_success_total{finished_reason="length"} grew ${d("vllm:request_success_total", { finished_reason: "length" })}, want 1`);
        assert(d("vllm:e2e_request_latency_seconds_count") === 1 && d("vllm:time_to_first_token_seconds_count") === 1, `e2e/ttft _count grew ${d("vllm:e2e_request_latency_seconds_count")}/${d("vllm:time_to_first_token_seconds_count")}, want 1/1`);
        assert(d("vllm:inter_token_latency_seconds_count") >= 1, `inter_token_latency _count grew ${d("vllm:inter_token_latency_seconds_count")}`);
    });
    await check("metrics.prefix_cache_hits", async () => {
        const prompt = "The history of the lighthouse keepers of the northern coast. ".repeat(12) + Math.random();
        const before = (await getMetrics(main.base)).series;
        await complete({ prompt, max_tokens: 2 });
        const mid = (await getMetrics(main.base)).series;
        const r2 = await complete({ prompt, max_tokens: 2 });
        const after = (await getMetrics(main.base)).series;
        const v = (s, n) => metricValue(s, n, { model_name: NAME }) ?? 0;
        assert(v(mid, "vllm:prefix_cache_queries_total") > v(before, "vllm:prefix_cache_queries_total"), "prefix_cache_queries_total did not grow");
        const hits = v(after, "vllm:prefix_cache_hits_total") - v(mid, "vllm:prefix_cache_hits_total");
        assert(hits >= 16 && hits <= r2.usage.prompt_tokens, `second identical prompt of ${r2.usage.prompt_tokens} tokens: prefix_cache_hits_total grew ${hits}, want >= 16 (one page)`);
        const cached = r2.usage.prompt_tokens_details?.cached_tokens;
        assert(cached === hits, `usage.prompt_tokens_details.cached_tokens ${cached} vs prefix_cache_hits_total growth ${hits}`);
    });
    await check("metrics.grammar_compile_counted", async () => {
        // The mask time's shape (histogram) is judged by metrics.names; here only that it grows,
        // read from the histogram's _count or, failing that, a _total counter.
        const before = (await getMetrics(main.base)).series;
        const schema = { type: "object", properties: { ["k" + Math.random().toString(36).slice(2, 8)]: { type: "integer" } } };
        await chat({ messages: MSGS, max_tokens: 8, structured_outputs: { json: schema } });
        const after = (await getMetrics(main.base)).series;
        const d = (n) => {
            const a = metricValue(after, n, { model_name: NAME }), b = metricValue(before, n, { model_name: NAME });
            return a === undefined || b === undefined ? undefined : a - b;
        };
        const compiles = d("glint:grammar_compile_seconds_count");
        const masks = d("glint:grammar_mask_seconds_count") ?? d("glint:grammar_mask_seconds_total");
        assert(compiles >= 1, `a new schema: glint:grammar_compile_seconds_count grew ${compiles ?? "(missing)"}, want >= 1`);
        assert(masks > 0, `a constrained request: glint:grammar_mask_seconds (_count or _total) grew ${masks ?? "(missing)"}, want > 0`);
    });

    // ---- lifecycle ----
    await check("lifecycle.disconnect_mid_stream", async () => {
        const ac = new AbortController();
        const res = await fetch(`${main.base}/v1/chat/completions`, { method: "POST", signal: ac.signal, headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` }, body: JSON.stringify({ model: NAME, messages: MSGS, max_tokens: 1900, temperature: 1, stream: true }) });
        assert(res.status === 200, `stream: HTTP ${res.status}`);
        const reader = res.body.getReader();
        let text = "";
        while ((text.match(/\n\n/g) || []).length < 3) {
            const { value, done } = await reader.read();
            if (done) break;
            text += Buffer.from(value).toString();
        }
        const mid = (await getMetrics(main.base)).series;
        const running = metricValue(mid, "vllm:num_requests_running", { model_name: NAME }), held = metricValue(mid, "glint:kv_pages_held_by_requests", { model_name: NAME });
        ac.abort();
        try { await reader.cancel(); } catch {}
        assert(running >= 1 && held >= 1, `while streaming: num_requests_running ${running}, kv_pages_held_by_requests ${held}; want >= 1 each`);
        const w = await waitIdle(main.base, NAME, 8000);
        assert(w.ok, `8 s after the client disconnected: running ${w.running}, waiting ${w.waiting}, pages held ${w.held}; want 0 (1900-token request not cancelled?)`);
    }, 30000);
    await check("lifecycle.disconnect_non_streamed", async () => {
        const ac = new AbortController();
        const p = fetch(`${main.base}/v1/completions`, { method: "POST", signal: ac.signal, headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` }, body: JSON.stringify({ model: NAME, prompt: P, max_tokens: 2000, ignore_eos: true }) }).catch(() => null);
        await sleep(600);
        const mid = (await getMetrics(main.base)).series;
        const running = metricValue(mid, "vllm:num_requests_running", { model_name: NAME });
        ac.abort();
        await p;
        assert(running >= 1, `600 ms into a 2000-token request: num_requests_running ${running}`);
        const w = await waitIdle(main.base, NAME, 8000);
        assert(w.ok, `8 s after the client disconnected: running ${w.running}, waiting ${w.waiting}, pages held ${w.held}; want 0`);
    }, 30000);
    await check("error.queue_full_503", async () => {
        const N = MAX_SEQS + MAX_WAITING + 12;
        const rs = await Promise.all(Array.from({ length: N }, (_, i) => http(main.base, "POST", "/v1/completions", { key: KEY, body: { model: NAME, prompt: P + i, max_tokens: 48, ignore_eos: true }, timeoutMs: 60000 })));
        const codes = rs.map((r) => r.status);
        const rej = rs.filter((r) => r.status === 503);
        assert(codes.every((c) => c === 200 || c === 503), `statuses ${short(codes)}: only 200 and 503 expected`);
        assert(rej.length >= 1, `${N} concurrent requests with --max-num-seqs ${MAX_SEQS} --max-waiting ${MAX_WAITING}: no 503 (statuses ${short(codes)})`);
        assert(codes.filter((c) => c === 200).length >= MAX_SEQS, `only ${codes.filter((c) => c === 200).length} succeeded`);
        for (const r of rej) {
            expectError(r, 503, [], "queue full: ");
            assert(/^\d+$/.test(r.headers.get("retry-after") || ""), `503 without a Retry-After header (got ${short(r.headers.get("retry-after"))})`);
        }
        const w = await waitIdle(main.base, NAME, 10000);
        assert(w.ok, `after the burst: running ${w.running} waiting ${w.waiting} held ${w.held}`);
    }, 60000);
    await check("lifecycle.sigterm_drain", async () => {
        const req = { prompt: P, max_tokens: 600, ignore_eos: true, temperature: 1, seed: 3 };
        const pending = complete(req).then((r) => ({ r }), (e) => ({ e }));
        await sleep(700);
        main.proc.kill("SIGTERM");
        const tSig = Date.now();
        await sleep(400);
        const refused = await new Promise((resolve) => {
            const s = net.connect({ port: main.port, host: "127.0.0.1" });
            s.setTimeout(2000);
            s.on("connect", () => { s.destroy(); resolve("connected"); });
            s.on("error", (e) => resolve(e.code));
            s.on("timeout", () => { s.destroy(); resolve("timeout"); });
        });
        const out = await pending;
        const ex = await withTimeout(main.exited, 40000, "server exit after SIGTERM").catch((e) => ({ code: `none (${e.message})` }));
        assert(!out.e, `in-flight ${desc(req)} failed after SIGTERM: ${errOf(out.e)}`);
        assert(out.r.usage.completion_tokens === 600 && out.r.choices[0].finish_reason === "length", `in-flight request after SIGTERM: ${out.r.usage.completion_tokens} tokens, finish ${out.r.choices[0].finish_reason}; want 600, length`);
        assert(refused === "ECONNREFUSED", `new connection 400 ms after SIGTERM: ${refused}, want ECONNREFUSED`);
        assert(ex.code === 0, `exit after SIGTERM: code ${ex.code} signal ${ex.signal} (${Date.now() - tSig} ms), want 0; log tail ${tail(main.log(), 300)}`);
    }, 60000);

    if (VERBOSE) console.log(`# ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    await main.stop();
    finish();
}

function pickUsage(u) {
    return u ? { prompt_tokens: u.prompt_tokens, completion_tokens: u.completion_tokens, total_tokens: u.total_tokens } : null;
}
// A 4-code-point substring of T that first occurs at a code-point boundary k >= 1, is not
// whitespace-edged, has no U+FFFD and does not occur in AVOID.
function pickStop(T, avoid) {
    const cps = Array.from(T);
    const starts = [];
    for (let i = Math.floor(cps.length / 3); i < cps.length - 4; i++) starts.push(i);
    for (const i of starts) {
        const s = cps.slice(i, i + 4).join("");
        const k = cps.slice(0, i).join("").length;
        if (k < 1 || s.trim() !== s || s.includes("\ufffd") || avoid.includes(s)) continue;
        if (T.indexOf(s) !== k) continue;
        return s;
    }
    return null;
}
// Raw POST via node:http so a 413 sent before the body is read still reads as a status.
function rawPost(port, p, body, key) {
    return import("node:http").then(
        ({ default: h }) =>
            new Promise((resolve) => {
                let settled = false;
                const done = (v) => {
                    if (!settled) {
                        settled = true;
                        resolve(v);
                    }
                };
                const req = h.request({ host: "127.0.0.1", port, path: p, method: "POST", headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), authorization: `Bearer ${key}` } }, (res) => {
                    let text = "";
                    res.on("data", (d) => (text += d));
                    res.on("end", () => done({ status: res.statusCode, text }));
                    res.on("error", () => done({ status: res.statusCode, text }));
                });
                req.setTimeout(20000, () => {
                    req.destroy();
                    done({ status: 0, error: "timeout" });
                });
                req.on("error", (e) => setTimeout(() => done({ status: 0, error: e.code || e.message }), 50));
                req.end(body);
            }),
    );
}

main_().catch((e) => {
    console.log(`FAIL suite.crash: ${e?.stack ?? e}`);
    failed++;
    finish();
});
