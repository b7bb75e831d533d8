// SPDX-License-Identifier: MIT
// Shared helpers for the `glint serve` end-to-end suites (suite.mjs, guided200.mjs, load.mjs):
// starting and stopping a server on a free loopback port, raw HTTP, SSE parsing, Prometheus
// parsing, ajv, the framing-text detector and a seeded RNG. The npm modules (openai, ajv,
// ajv-formats) are the ones pinned in tests/oracle/package.json.
import zlib from "node:zlib";
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const requireOracle = createRequire(path.join(ROOT, "tests/oracle/package.json"));
const openaiModule = requireOracle("openai");
export const OpenAI = openaiModule.OpenAI ?? openaiModule.default ?? openaiModule;
const ajvModule = requireOracle("ajv/dist/2020.js");
const Ajv2020 = ajvModule.default ?? ajvModule;
const formatsModule = requireOracle("ajv-formats");
const addFormats = formatsModule.default ?? formatsModule;

export const GLINT_BIN = path.resolve(ROOT, process.env.GLINT_BIN || "build/glint");
// GL_SERVE_DEVICE=vulkan[:N]: every server started here (startServer, serveArgs) runs on that
// device. GL_TEST_TIMEOUT_SCALE=K multiplies every wait below and the suites' deadlines (a slow
// device such as lavapipe: a step of the tiny preset takes ~1 s there, ~20 ms on the CPU); what
// is checked does not change.
// GL_SERVE_EXTRA_ARGS='["--flag", "value", ...]' (a JSON array) is appended to them, e.g. a
// --speculative-config (issue 22: the suites pass with speculation on).
export const SERVE_DEVICE_ARGS = [
    ...(process.env.GL_SERVE_DEVICE ? ["--device", process.env.GL_SERVE_DEVICE] : []),
    ...JSON.parse(process.env.GL_SERVE_EXTRA_ARGS || "[]"),
];
export const TIMEOUT_SCALE = Number(process.env.GL_TEST_TIMEOUT_SCALE || 1) || 1;
export const T = (ms) => Math.round(ms * TIMEOUT_SCALE);

// ---------------------------------------------------------------------------------------------
// Child processes: every server started here is SIGKILLed when this process exits, whatever the
// reason (normal end, uncaught error, SIGINT/SIGTERM to the suite).
const children = new Set();
function killChildren() {
    for (const c of children)
        if (c.exitCode === null && c.signalCode === null) {
            try {
                c.kill("SIGKILL");
            } catch {}
        }
}
process.on("exit", killChildren);
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"])
    process.on(sig, () => {
        killChildren();
        process.exit(130);
    });

export function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.unref();
        s.on("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const { port } = s.address();
            s.close(() => resolve(port));
        });
    });
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function withTimeout(promise, ms, what) {
    let t;
    return Promise.race([
        promise,
        new Promise((_, rej) => {
            t = setTimeout(() => rej(new Error(`${what}: timed out after ${T(ms)} ms`)), T(ms));
        }),
    ]).finally(() => clearTimeout(t));
}

// Runs `glint ARGV` to completion (bounded); resolves {code, signal, stdout, stderr}.
export function runGlint(argv, { timeoutMs = 30000, env = {} } = {}) {
    return new Promise((resolve) => {
        const p = spawn(GLINT_BIN, argv, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
        children.add(p);
        let stdout = "", stderr = "";
        p.stdout.on("data", (d) => (stdout += d));
        p.stderr.on("data", (d) => (stderr += d));
        const t = setTimeout(() => p.kill("SIGKILL"), T(timeoutMs));
        p.on("error", (e) => {
            clearTimeout(t);
            resolve({ code: null, signal: null, stdout, stderr: stderr + String(e) });
        });
        p.on("close", (code, signal) => {
            clearTimeout(t);
            children.delete(p);
            resolve({ code, signal, stdout, stderr });
        });
    });
}

// Starts `glint serve --model MODEL --host 127.0.0.1 --port P ARGS...` and waits for the line
// naming http://127.0.0.1:P, then for GET /health to answer 200 (unless waitHealthy is false).
// With --ssl-certfile in ARGS the URL is https:// (the process must trust the certificate, e.g.
// through NODE_EXTRA_CA_CERTS).
// pollWhileLoading: GET /health every 25 ms until that line appears; the statuses answered
// meanwhile are in srv.loadingHealth (the server listens before it loads the model).
export async function startServer({ model, args = [], env = {}, timeoutMs = 90000, waitHealthy = true, pollWhileLoading = false } = {}) {
    const host = "127.0.0.1";
    const port = await freePort();
    const argv = ["serve", "--model", model, "--host", host, "--port", String(port), ...args, ...SERVE_DEVICE_ARGS];
    timeoutMs = T(timeoutMs);
    const proc = spawn(GLINT_BIN, argv, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    children.add(proc);
    let log = "";
    const keep = (d) => {
        log += d;
        if (log.length > 200000) log = log.slice(-100000);
    };
    const needle = `${args.includes("--ssl-certfile") ? "https" : "http"}://${host}:${port}`;
    const exited = new Promise((resolve) =>
        proc.on("close", (code, signal) => {
            children.delete(proc);
            resolve({ code, signal });
        }),
    );
    const srv = {
        proc,
        port,
        host,
        base: needle,
        argv,
        log: () => log,
        exited,
        urlLine: null,
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
            await withTimeout(exited, 10000, "server exit").catch(() => {});
        },
    };
    srv.loadingHealth = [];
    if (pollWhileLoading)
        (async () => {
            while (!srv.urlLine && proc.exitCode === null && proc.signalCode === null) {
                try {
                    const r = await fetch(`${needle}/health`, { signal: AbortSignal.timeout(2000) });
                    await r.arrayBuffer();
                    if (!srv.urlLine) srv.loadingHealth.push(r.status);
                } catch {}
                await sleep(25);
            }
        })();
    await new Promise((resolve, reject) => {
        let done = false;
        const finish = (err) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            err ? reject(err) : resolve();
        };
        const onData = (d) => {
            keep(d);
            if (!srv.urlLine && log.includes(needle)) {
                srv.urlLine = log.split("\n").find((l) => l.includes(needle));
                finish();
            }
        };
        proc.stdout.on("data", onData);
        proc.stderr.on("data", onData);
        proc.on("error", (e) => finish(new Error(`cannot start ${GLINT_BIN}: ${e.message}`)));
        exited.then(({ code, signal }) =>
            finish(new Error(`glint ${argv.join(" ")} exited (code ${code}, signal ${signal}) before printing ${needle}; output: ${tail(log)}`)),
        );
        const timer = setTimeout(() => finish(new Error(`no line naming ${needle} within ${timeoutMs} ms; output: ${tail(log)}`)), timeoutMs);
    }).catch(async (e) => {
        await srv.stop();
        throw e;
    });
    if (waitHealthy) {
        const t0 = Date.now();
        let last = "";
        for (;;) {
            try {
                const r = await fetch(`${srv.base}/health`);
                await r.arrayBuffer();
                if (r.status === 200) break;
                last = `status ${r.status}`;
            } catch (e) {
                last = e.cause?.code ?? e.message;
            }
            if (Date.now() - t0 > timeoutMs) {
                await srv.stop();
                throw new Error(`GET /health never answered 200 within ${timeoutMs} ms (last: ${last})`);
            }
            // 25 ms, as pollWhileLoading: the server listens before it loads the model, so the
            // first probes answer 503 and a coarser step adds its wait to every server start
            await sleep(25);
        }
    }
    return srv;
}

export function tail(s, n = 600) {
    s = String(s ?? "");
    return JSON.stringify(s.length > n ? "..." + s.slice(-n) : s);
}

export function short(v, n = 300) {
    let s;
    try {
        s = typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v);
    } catch {
        s = String(v);
    }
    if (s === undefined) s = String(v);
    return s.length > n ? s.slice(0, n) + "..." : s;
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP. Resolves {status, headers, text, json} (json null when the body is not JSON).
export async function http(base, method, p, { body, key, headers = {}, rawBody, timeoutMs = 30000 } = {}) {
    const h = { ...headers };
    if (key) h.authorization = `Bearer ${key}`;
    let payload;
    if (rawBody !== undefined) payload = rawBody;
    else if (body !== undefined) {
        payload = JSON.stringify(body);
        h["content-type"] ??= "application/json";
    }
    const r = await fetch(base + p, { method, headers: h, body: payload, signal: AbortSignal.timeout(T(timeoutMs)) });
    const text = await r.text();
    let json = null;
    try {
        json = JSON.parse(text);
    } catch {}
    return { status: r.status, headers: r.headers, text, json };
}

// Named checks for one test file: check(name, fn, timeoutMs) runs fn under a timeout and prints
// "PASS name" or "FAIL name: why" (one line); counts holds {passed, failed} for the closing line.
export function checkRunner(defaultTimeoutMs) {
    const counts = { passed: 0, failed: 0 };
    const check = async (name, fn, timeoutMs = defaultTimeoutMs) => {
        try {
            await withTimeout(Promise.resolve().then(fn), timeoutMs, "check");
            counts.passed++;
            console.log(`PASS ${name}`);
        } catch (e) {
            counts.failed++;
            console.log(`FAIL ${name}: ${String(e?.message ?? e).replace(/\s*\n\s*/g, " | ").slice(0, 1500)}`);
        }
    };
    return { check, counts };
}

export function assert(cond, msg) {
    if (!cond) throw new Error(msg);
}

// Asserts an OpenAI error object {"error": {message, type, param, code: STATUS}}; `names` (string
// or list) must each appear in param or message (case-insensitive). Returns the error object.
export function expectError(res, status, names = [], what = "") {
    const got = `HTTP ${res.status} ${short(res.text, 400)}`;
    if (res.status !== status) throw new Error(`${what}expected HTTP ${status}, got ${got}`);
    const e = res.json?.error;
    if (!e || typeof e !== "object") throw new Error(`${what}expected an OpenAI error object {"error": {...}}, got ${got}`);
    if (typeof e.message !== "string" || !e.message) throw new Error(`${what}error.message missing: ${got}`);
    if (typeof e.type !== "string") throw new Error(`${what}error.type is not a string: ${got}`);
    if (!("param" in e)) throw new Error(`${what}error.param missing: ${got}`);
    if (e.code !== status) throw new Error(`${what}error.code should be the integer ${status}: ${got}`);
    const hay = `${e.param ?? ""} ${e.message}`.toLowerCase();
    for (const n of [].concat(names))
        if (!hay.includes(String(n).toLowerCase())) throw new Error(`${what}expected '${n}' in error.param or error.message, got ${got}`);
    return e;
}

// ---------------------------------------------------------------------------------------------
// SSE. Parses the full text of a response body strictly (vLLM framing: events `data: X\n\n`,
// comment lines `:...` tolerated, the last event `data: [DONE]`). Returns {chunks, done, problems}.
export function parseSSE(text) {
    const problems = [];
    const chunks = [];
    let done = false;
    if (!text.endsWith("\n\n")) problems.push(`stream does not end with a blank line: ${tail(text, 80)}`);
    const events = text.split("\n\n");
    if (events.length && events[events.length - 1] === "") events.pop();
    for (const ev of events) {
        const lines = ev.split("\n").filter((l) => !l.startsWith(":"));
        if (!lines.length) continue;
        if (lines.length !== 1 || !lines[0].startsWith("data: ")) {
            problems.push(`malformed event ${short(ev, 120)}`);
            continue;
        }
        const data = lines[0].slice(6);
        if (done) problems.push(`event after [DONE]: ${short(data, 120)}`);
        if (data === "[DONE]") {
            done = true;
            continue;
        }
        try {
            chunks.push(JSON.parse(data));
        } catch {
            problems.push(`event is not JSON: ${short(data, 120)}`);
        }
    }
    if (!done) problems.push("no data: [DONE] event");
    return { chunks, done, problems };
}

// Streams a POST with stream:true; resolves {status, headers, text, sse}. `onChunk(chunk, n)`
// may return true to abort the request (a client disconnect) after that chunk.
export async function streamPost(base, p, body, { key, onChunk, timeoutMs = 60000 } = {}) {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error("stream timed out")), T(timeoutMs));
    const headers = { "content-type": "application/json" };
    if (key) headers.authorization = `Bearer ${key}`;
    try {
        const r = await fetch(base + p, { method: "POST", headers, body: JSON.stringify(body), signal: ac.signal });
        if (r.status !== 200 || !onChunk) {
            const text = await r.text();
            return { status: r.status, headers: r.headers, text, sse: r.status === 200 ? parseSSE(text) : null, aborted: false };
        }
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let text = "", scanned = 0, n = 0;
        for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            text += dec.decode(value, { stream: true });
            let i;
            while ((i = text.indexOf("\n\n", scanned)) >= 0) {
                const ev = text.slice(scanned, i);
                scanned = i + 2;
                if (!ev.startsWith("data: ") || ev === "data: [DONE]") continue;
                let chunk;
                try {
                    chunk = JSON.parse(ev.slice(6));
                } catch {
                    continue;
                }
                if (onChunk(chunk, n++)) {
                    ac.abort();
                    return { status: r.status, headers: r.headers, text, sse: null, aborted: true };
                }
            }
        }
        return { status: r.status, headers: r.headers, text, sse: parseSSE(text), aborted: false };
    } finally {
        clearTimeout(timer);
    }
}

// Folds chat.completion.chunk objects into per-choice messages like a non-streamed reply.
export function assembleChat(chunks) {
    const choices = new Map();
    let usage = null, id = null;
    const problems = [];
    for (const c of chunks) {
        if (id === null) id = c.id;
        else if (c.id !== id) problems.push(`chunk id changed ${id} -> ${c.id}`);
        if (c.usage) usage = c.usage;
        for (const ch of c.choices ?? []) {
            if (!choices.has(ch.index))
                choices.set(ch.index, { index: ch.index, role: null, content: "", reasoning: "", reasoning_content: "", tool_calls: [], finish_reason: null, stop_reason: null, logprobs: [], deltas: 0, firstDelta: ch.delta });
            const a = choices.get(ch.index);
            const d = ch.delta ?? {};
            a.deltas++;
            if (d.role) a.role ??= d.role;
            if (typeof d.content === "string") a.content += d.content;
            if (typeof d.reasoning === "string") a.reasoning += d.reasoning;
            if (typeof d.reasoning_content === "string") a.reasoning_content += d.reasoning_content;
            for (const tc of d.tool_calls ?? []) {
                const i = tc.index ?? 0;
                a.tool_calls[i] ??= { id: null, type: null, function: { name: "", arguments: "" } };
                const t = a.tool_calls[i];
                if (tc.id) t.id = tc.id;
                if (tc.type) t.type = tc.type;
                if (tc.function?.name) t.function.name += tc.function.name;
                if (typeof tc.function?.arguments === "string") t.function.arguments += tc.function.arguments;
            }
            if (ch.logprobs?.content) a.logprobs.push(...ch.logprobs.content);
            if (ch.finish_reason) a.finish_reason = ch.finish_reason;
            if (ch.stop_reason !== undefined && ch.stop_reason !== null) a.stop_reason = ch.stop_reason;
        }
    }
    return { id, usage, problems, choices: [...choices.values()].sort((a, b) => a.index - b.index) };
}

export function assembleCompletion(chunks) {
    const choices = new Map();
    let usage = null;
    for (const c of chunks) {
        if (c.usage) usage = c.usage;
        for (const ch of c.choices ?? []) {
            if (!choices.has(ch.index)) choices.set(ch.index, { index: ch.index, text: "", finish_reason: null, stop_reason: null });
            const a = choices.get(ch.index);
            if (typeof ch.text === "string") a.text += ch.text;
            if (ch.finish_reason) a.finish_reason = ch.finish_reason;
            if (ch.stop_reason !== undefined && ch.stop_reason !== null) a.stop_reason = ch.stop_reason;
        }
    }
    return { usage, choices: [...choices.values()].sort((a, b) => a.index - b.index) };
}

// ---------------------------------------------------------------------------------------------
// Prometheus text format: returns [{name, labels, value}].
export function parseMetrics(text) {
    const out = [];
    for (const line of text.split("\n")) {
        if (!line || line.startsWith("#")) continue;
        const m = /^([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$/.exec(line.trim());
        if (!m) {
            out.push({ name: null, bad: line });
            continue;
        }
        const labels = {};
        if (m[3]) {
            const re = /\s*([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?/g;
            let lm;
            while ((lm = re.exec(m[3]))) labels[lm[1]] = lm[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
        }
        const v = m[4] === "+Inf" ? Infinity : m[4] === "-Inf" ? -Infinity : Number(m[4]);
        out.push({ name: m[1], labels, value: v });
    }
    return out;
}

// Sum of the series NAME whose labels include every pair of `match`; undefined when none exists.
export function metricValue(series, name, match = {}) {
    let sum, found = false;
    for (const s of series) {
        if (s.name !== name) continue;
        if (!Object.entries(match).every(([k, v]) => s.labels[k] === v)) continue;
        found = true;
        sum = (sum ?? 0) + s.value;
    }
    return found ? sum : undefined;
}

export async function getMetrics(base) {
    const r = await http(base, "GET", "/metrics");
    if (r.status !== 200) throw new Error(`GET /metrics: HTTP ${r.status} ${short(r.text)}`);
    return { text: r.text, series: parseMetrics(r.text), headers: r.headers };
}

// Polls /metrics until num_requests_running and kv_pages_held_by_requests are both 0 for model
// MODEL (bounded); resolves {ok, running, held, waited_ms}.
export async function waitIdle(base, model, timeoutMs = 15000) {
    timeoutMs = T(timeoutMs);
    const t0 = Date.now();
    let running, held, waiting;
    for (;;) {
        try {
            const { series } = await getMetrics(base);
            running = metricValue(series, "vllm:num_requests_running", { model_name: model });
            waiting = metricValue(series, "vllm:num_requests_waiting", { model_name: model });
            held = metricValue(series, "glint:kv_pages_held_by_requests", { model_name: model });
            if (running === 0 && held === 0 && (waiting ?? 0) === 0) return { ok: true, running, held, waiting, waited_ms: Date.now() - t0 };
        } catch (e) {
            running = held = `error: ${e.message}`;
        }
        if (Date.now() - t0 > timeoutMs) return { ok: false, running, held, waiting, waited_ms: Date.now() - t0 };
        await sleep(100);
    }
}

// ---------------------------------------------------------------------------------------------
// Text that must never reach content/reasoning: special-token names and ATEM header text.
const FRAMING_RES = [/<\|[A-Za-z0-9_]+\|>/, /(^|\s)to=(self|user)\b/, /<\|start\|>|<\|message\|>|<\|eot\|>|<\|eom\|>/, /^\s*assistant\s+to=/];
export function framingProblem(s) {
    if (s === null || s === undefined) return null;
    if (typeof s !== "string") return `not a string: ${short(s)}`;
    for (const re of FRAMING_RES) {
        const m = re.exec(s);
        if (m) return `framing text ${JSON.stringify(m[0])} at ${m.index} in ${short(s, 200)}`;
    }
    return null;
}

export function makeAjv() {
    const ajv = new Ajv2020({ strict: false, allErrors: false, logger: false, validateFormats: true });
    addFormats(ajv);
    return ajv;
}

// Compiles SCHEMA with ajv (2020 dialect, $schema dropped as in grammar_validate.mjs); returns a
// function doc -> null | error text, or throws if ajv cannot compile it.
export function schemaValidator(schema) {
    const ajv = makeAjv();
    let s = schema;
    if (s && typeof s === "object" && !Array.isArray(s)) {
        s = { ...s };
        delete s.$schema;
    }
    const v = ajv.compile(s);
    return (doc) => (v(doc) ? null : ajv.errorsText(v.errors).slice(0, 300));
}

// Seeded PRNG (mulberry32) and a seeded Fisher-Yates shuffle.
export function rng(seed) {
    let a = seed >>> 0;
    return () => {
        a = (a + 0x6d2b79f5) >>> 0;
        let t = a;
        t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
        return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
}
export function shuffled(list, seed) {
    const r = rng(seed), a = list.slice();
    for (let i = a.length - 1; i > 0; i--) {
        const j = Math.floor(r() * (i + 1));
        [a[i], a[j]] = [a[j], a[i]];
    }
    return a;
}

// VmRSS of PID in KiB (Linux /proc), or null.
export function rssKiB(pid) {
    try {
        const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
        return m ? Number(m[1]) : null;
    } catch {
        return null;
    }
}

// Simple argv parser: --key value / --flag; positional args collected in _.
export function parseArgs(argv) {
    const out = { _: [] };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (a.startsWith("--")) {
            const k = a.slice(2);
            if (k.includes("=")) out[k.slice(0, k.indexOf("="))] = k.slice(k.indexOf("=") + 1);
            else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) out[k] = argv[++i];
            else out[k] = true;
        } else out._.push(a);
    }
    return out;
}

// The served model name: the first id of GET /v1/models.
export async function modelName(base, key) {
    const r = await http(base, "GET", "/v1/models", { key });
    const id = r.json?.data?.[0]?.id;
    if (r.status !== 200 || typeof id !== "string") throw new Error(`GET /v1/models: HTTP ${r.status} ${short(r.text)}`);
    return id;
}

// What a TCP connect to 127.0.0.1:port meets: "connected", an error code (ECONNREFUSED...)
// or "timeout" (a drained server must refuse new connections).
export function connectResult(port, timeoutMs = 3000) {
    return new Promise((resolve) => {
        const s = net.connect({ port, host: "127.0.0.1" });
        s.setTimeout(timeoutMs);
        s.on("connect", () => {
            s.destroy();
            resolve("connected");
        });
        s.on("error", (e) => resolve(e.code));
        s.on("timeout", () => {
            s.destroy();
            resolve("timeout");
        });
    });
}

// A minimal RGB PNG encoder (filter 0 rows, one IDAT) so the test needs no image package.
const CRC = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
});
function crc32(buf) {
    let c = 0xffffffff;
    for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
    const len = Buffer.alloc(4), crc = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const td = Buffer.concat([Buffer.from(type, "ascii"), data]);
    crc.writeUInt32BE(crc32(td));
    return Buffer.concat([len, td, crc]);
}
// png(w, h, (x, y) => [r, g, b]): the bytes of a w x h 8-bit RGB PNG.
export function png(w, h, pixel) {
    const ihdr = Buffer.alloc(13);
    ihdr.writeUInt32BE(w, 0);
    ihdr.writeUInt32BE(h, 4);
    ihdr.set([8, 2, 0, 0, 0], 8); // 8-bit RGB
    const raw = Buffer.alloc(h * (1 + 3 * w));
    for (let y = 0; y < h; y++)
        for (let x = 0; x < w; x++) raw.set(pixel(x, y), y * (1 + 3 * w) + 1 + 3 * x);
    return Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}
