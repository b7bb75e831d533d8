// SPDX-License-Identifier: MIT
// Hostile-client suite for `glint serve` (run by tests/hostile/check_hostile.sh): one server with
// the tiny random-weight model and short limits, a well-behaved client (good_client.mjs, one chat
// completion per second from 127.0.0.1) and a list of attacks from 127.0.0.2, so the per-address
// limit is seen to hold the attacker and not the good client. Loopback only; every loop is bounded
// in count and time.
// Each attack must be answered as expected (a 4xx naming the problem, or a closed connection
// where HTTP allows nothing better), the server must not crash, every good request must succeed,
// and the good client's p99 latency during the attacks must stay within 3x its baseline p99 measured
// in the same run (before the attacks and again after them, the larger), with a floor:
// p99 <= 3 * max(baseline p99s, 125 ms). Why 3x: with 2x, a fresh-clone `.ci/run` on a slow day
// (d18b71c, 2026-12-05, the ASan lane running beside) failed with one good request of 24 at 314 ms
// against baselines of 104 / 143 ms (2.2x); starvation, which this guards against, costs a good
// request a whole attack (a grammar compile behind a server-wide lock would hold it up to the
// compile's 1 s budget, 7-10x the baseline), still far over 3x. Why a floor: with ~20
// good requests under attack the p99 is their maximum, one sample. On the 2-core test machine the
// ~50-90 ms good request swings by tens of ms run to run, and the CPU-bound attacks (parsing a
// 1-10 MB body, 1,000 connects, a grammar compile) take ~100 ms of one of the two cores by nature.
// With a 50 ms floor about half the runs failed on such noise; with 100 ms, 2 of 7 runs peaked at
// 201 ms against a 200 ms limit (in different attacks each time), none above 243 ms under heavy
// load from other builds; no attack was answered late in any of them.
// Attacks that saturate the engine on purpose (requests queued behind a full batch, then dropped)
// or burn a bounded burst of CPU (a grammar compile within its 1 s budget) start right after a
// good request completes and last under 1 s, so they fall between two good requests: a full
// first-come-first-served queue, or a busy core on a 2-core machine, delays everyone by design,
// which is not the harm measured here.
// Prints a table: attack, expected, got, ms to answer, server RSS (MiB) before and after.
// argv: MODEL.gguf
import { fork } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sleep, startServer, tail, withTimeout } from "../server/lib.mjs";

const MODEL = process.argv[2];
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ATT = "127.0.0.2"; // the attackers' source address; the good client uses 127.0.0.1
const NAME = "hostile";
const T_HEADERS = 2, T_BODY = 2, T_KEEPALIVE = 3, PER_IP = 64; // seconds, connections
const MAX_BODY = 32 << 20; // the default --max-body-bytes
const BASELINE_S = 12; // good-client requests before any attack
const FLOOR_MS = 125; // see the header: the p99 floor
const COMPILE_ATTACK = "disconnect mid-grammar-compile";
const TRIM_WAIT_MS = 1300; // glint trims at most once a second, on a 100 ms guard tick
const COMPILE_SLACK_MIB = 24; // 16 MiB that may wait for a trim (GL_TRIM_MIN_BYTES) + 8

let srv;
const rows = [];
let failures = 0;

function rssMiB(pid) {
    try {
        const m = /VmRSS:\s+(\d+)\s+kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
        return m ? Number(m[1]) / 1024 : NaN;
    } catch {
        return NaN;
    }
}

// Where a process's resident memory is, from /proc/PID/smaps, in MiB by kind: the main heap
// (glibc's main arena), the other malloc arenas (glibc maps each thread arena as a 64 MiB-aligned
// heap of up to 64 MiB), thread stacks (8 MiB anonymous mappings), other anonymous memory
// (malloc's mmapped blocks, the KV pool), and file mappings (the model, libraries).
function smapsMiB(pid) {
    const out = { heap: 0, arenas: 0, stacks: 0, anon: 0, files: 0 };
    let text;
    try {
        text = fs.readFileSync(`/proc/${pid}/smaps`, "utf8");
    } catch {
        return null;
    }
    let kind = null;
    for (const line of text.split("\n")) {
        const m = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
        if (m) {
            const start = BigInt(`0x${m[1]}`), size = Number(BigInt(`0x${m[2]}`) - start), name = m[4];
            if (name === "[heap]") kind = "heap";
            else if (name.startsWith("/")) kind = "files";
            else if (name) kind = null; // [stack], [vdso], ...: not counted
            else if (start % 0x4000000n === 0n && size <= 0x4000000) kind = "arenas";
            else if (size === 8 << 20) kind = "stacks";
            else kind = "anon";
            continue;
        }
        const r = /^Rss:\s+(\d+) kB/.exec(line);
        if (r && kind) out[kind] += Number(r[1]) / 1024;
    }
    return out;
}

// ---- raw sockets ----

// Connects from ATT, runs drive(sock) (which writes), collects everything the server sends until
// it closes or limitMs passes. Resolves {status, text, closed, ms}: ms from connect to the first
// byte of the answer, or to the close when nothing came.
function raw(drive, { limitMs = 8000, port = srv.port, localAddress = ATT } = {}) {
    return new Promise((resolve) => {
        const t0 = performance.now();
        let data = Buffer.alloc(0), first = null, done = false;
        const s = net.connect({ host: "127.0.0.1", port, localAddress });
        const finish = (closed) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            s.destroy();
            const text = data.toString("latin1");
            const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
            resolve({ status: m ? Number(m[1]) : 0, text, closed, ms: (first ?? performance.now()) - t0 });
        };
        const timer = setTimeout(() => finish(false), limitMs);
        s.on("data", (d) => {
            if (first === null) first = performance.now();
            data = Buffer.concat([data, d]);
        });
        s.on("error", () => finish(true));
        s.on("close", () => finish(true));
        s.on("connect", () => drive(s, () => done));
    });
}

// Writes pieces to s every everyMs until the server closes it or `count` pieces were sent.
async function trickle(s, isDone, piece, everyMs, count) {
    for (let i = 0; i < count && !isDone() && !s.destroyed; i++) {
        s.write(piece);
        await sleep(everyMs);
    }
}

// ---- well-formed requests from ATT ----

function post(p, body, { limitMs = 20000, abortAfterMs = 0, stream = false } = {}) {
    return new Promise((resolve) => {
        const t0 = performance.now();
        const buf = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === "string" ? body : JSON.stringify(body));
        let done = false;
        const finish = (v) => {
            if (done) return;
            done = true;
            clearTimeout(timer);
            resolve({ ms: performance.now() - t0, ...v });
        };
        const req = http.request({ host: "127.0.0.1", port: srv.port, path: p, method: "POST", localAddress: ATT, agent: false, headers: { "content-type": "application/json", "content-length": buf.length } }, (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (d) => {
                if (text.length < 100000) text += d;
                if (abortAfterMs < 0 && stream) req.destroy(); // disconnect at the first streamed bytes
            });
            res.on("end", () => finish({ status: res.statusCode, text }));
            res.on("error", () => finish({ status: res.statusCode, text, aborted: true }));
            res.on("close", () => finish({ status: res.statusCode, text, aborted: true }));
        });
        const timer = setTimeout(() => {
            req.destroy();
            finish({ status: 0, text: "", timedOut: true });
        }, limitMs);
        if (abortAfterMs > 0) setTimeout(() => (req.destroy(), finish({ status: 0, text: "", aborted: true })), abortAfterMs);
        req.on("error", (e) => finish({ status: 0, text: String(e.code || e.message), aborted: true }));
        req.end(buf);
    });
}

async function metric(name) {
    const r = await fetch(`${srv.base}/metrics`);
    const t = await r.text();
    let v = 0;
    for (const line of t.split("\n")) if (line.startsWith(name)) v += Number(line.split(" ").pop());
    return v;
}
const aborts = () => metric('vllm:request_success_total{finished_reason="abort"');
const busy = async () => (await metric("vllm:num_requests_running")) + (await metric("vllm:num_requests_waiting"));

// Waits (bounded) until the abort counter reached want.
async function abortsReach(want, ms = 3000) {
    const t0 = Date.now();
    let a = await aborts();
    while (a < want && Date.now() - t0 < ms) {
        await sleep(50);
        a = await aborts();
    }
    return a;
}

// ---- the good client ----

class Good {
    constructor() {
        this.results = [];
        this.waiters = [];
        this.child = fork(path.join(HERE, "good_client.mjs"), [srv.base, NAME], { stdio: ["ignore", "inherit", "inherit", "ipc"] });
        this.child.on("message", (m) => {
            if (m.type === "result") {
                this.results.push({ ...m, during: current });
                for (const w of this.waiters.splice(0)) w();
            } else if (m.type === "stopped") this.onStopped?.();
        });
    }
    // Resolves right after the next good request completes (bounded).
    gap() {
        return withTimeout(new Promise((r) => this.waiters.push(r)), 5000, "good client result").catch(() => {});
    }
    async stop() {
        await withTimeout(new Promise((r) => ((this.onStopped = r), this.child.send({ type: "stop" }))), 25000, "good client stop").catch(() => this.child.kill("SIGKILL"));
        return this.results;
    }
}

function p99(xs) {
    const s = [...xs].sort((a, b) => a - b);
    return s.length ? s[Math.min(s.length - 1, Math.ceil(0.99 * s.length) - 1)] : NaN;
}

// ---- the attacks ----

const json = (o) => JSON.stringify(o);
const comp = (extra) => json({ model: NAME, prompt: "hello", max_tokens: 4, ...extra });
const is4xx = (want, needle) => (r) => r.status === want && (!needle || r.text.includes(needle));
const errIs = (want, needle) => (r) => r.status === want && r.text.includes(needle);

// The big bodies, built before the server starts so that the harness's own CPU (this process
// shares the machine's cores with the server) is not spent inside the attack window.
const B = {};
function prebuild() {
    B.deep = Buffer.from(`{"prompt":"x","user":${"[".repeat(100000)}${"]".repeat(100000)}}`);
    B.bias = Buffer.from(comp({ logit_bias: Object.fromEntries(Array.from({ length: 100000 }, (_, i) => [String(i), 1])) }));
    B.stop = Buffer.from(comp({ stop: Array.from({ length: 10000 }, (_, i) => `s${i}`) }));
    B.msgs = Buffer.from(json({ model: NAME, max_tokens: 4, messages: Array.from({ length: 100 }, () => ({ role: "user", content: "a".repeat(100000) })) }));
    B.word = Buffer.from(comp({ prompt: "a".repeat(10000000) }));
    B.tok = Buffer.from(json({ model: NAME, prompt: "a".repeat(3000000) }));
    B.detok = Buffer.from(json({ model: NAME, tokens: Array.from({ length: 1000000 }, () => 64) }));
    const defs = {};
    for (let i = 0; i < 2000; i++) defs[`d${i}`] = { $ref: `#/$defs/d${i + 1}` };
    defs.d2000 = { type: "string" };
    B.refs = Buffer.from(comp({ guided_json: { $defs: defs, $ref: "#/$defs/d0" } }));
    B.enum = Buffer.from(comp({ guided_json: { enum: Array.from({ length: 200000 }, (_, i) => `v${i}`) } }));
    const props = Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`p${i}`, { type: "string", enum: Array.from({ length: 100 }, (_, j) => `v${j}`) }]));
    B.compile = Buffer.from(comp({ guided_json: { type: "object", properties: props, required: Object.keys(props) }, max_tokens: 200 }));
}

// Each: [name, expected (words), run() -> {status, text, closed, ms, note}, ok(result) -> bool]
const attacks = [
    ["slowloris headers x10 (1 byte/250 ms)", `408 after ~${T_HEADERS} s`, async () => {
        const rs = await Promise.all(Array.from({ length: 10 }, () => raw(async (s, d) => {
            s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\n");
            await trickle(s, d, "X", 250, 60);
        })));
        const bad = rs.filter((r) => r.status !== 408 || !r.text.includes("--timeout-headers") || r.ms > (T_HEADERS + 1) * 1000);
        return { status: rs[0].status, text: rs[0].text, ms: Math.max(...rs.map((r) => r.ms)), note: `${10 - bad.length}/10 answered 408`, ok: bad.length === 0 };
    }],
    ["slowloris body x10 (10 B/250 ms)", `408 after ~${T_BODY} s`, async () => {
        const rs = await Promise.all(Array.from({ length: 10 }, () => raw(async (s, d) => {
            s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{"prompt":"`);
            await trickle(s, d, "aaaaaaaaaa", 250, 60);
        })));
        const bad = rs.filter((r) => r.status !== 408 || !r.text.includes("--timeout-body") || r.ms > (T_BODY + 1) * 1000);
        return { status: rs[0].status, text: rs[0].text, ms: Math.max(...rs.map((r) => r.ms)), note: `${10 - bad.length}/10 answered 408`, ok: bad.length === 0 };
    }],
    ["1000 idle connections from one address", `<=${PER_IP} held then 408; rest 429 or closed at once`, async () => {
        const rs = await Promise.all(Array.from({ length: 1000 }, () => raw(() => {}, { limitMs: (T_HEADERS + 3) * 1000 })));
        const n429 = rs.filter((r) => r.status === 429 && r.text.includes("--limit-concurrency-per-ip") && r.ms < 1500).length;
        const n408 = rs.filter((r) => r.status === 408 && r.ms < (T_HEADERS + 1.5) * 1000).length;
        const nClosed = rs.filter((r) => r.status === 0 && r.closed && r.ms < 1500).length;
        return { status: 429, text: "", ms: Math.max(...rs.map((r) => r.ms)), note: `${n408}x408 ${n429}x429 ${nClosed} closed`, ok: n408 + n429 + nClosed === 1000 && n408 <= PER_IP && n408 >= 1 && n429 >= 1 };
    }],
    ["idle keep-alive connection", `closed after ~${T_KEEPALIVE} s`, async () => {
        let t1 = 0;
        const r = await raw(async (s) => {
            s.write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
            s.once("data", () => (t1 = performance.now()));
        }, { limitMs: (T_KEEPALIVE + 3) * 1000 });
        const idle = performance.now() - t1;
        return { ...r, note: `answered ${r.status}, then closed after ${idle.toFixed(0)} ms idle`, ok: r.status === 200 && r.closed && idle > (T_KEEPALIVE - 0.5) * 1000 && idle < (T_KEEPALIVE + 1.5) * 1000 };
    }],
    ["oversized headers (100 KB)", "431", async () => raw((s) => s.write(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(100000)}\r\n\r\n`)), (r) => r.status === 431],
    ["oversized body (Content-Length 100 MB)", "413 before the body", async () => raw((s) => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{"prompt":`)), (r) => r.status === 413 && r.text.includes("--max-body-bytes") && r.ms < 1000],
    ["endless chunked body", "closed (past 2x --max-body-bytes) or 408", async () => raw(async (s, d) => {
        s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
        const chunk = Buffer.from(`100000\r\n${"a".repeat(0x100000)}\r\n`);
        for (let i = 0; i < 200 && !d() && !s.destroyed; i++) if (!s.write(chunk)) await new Promise((r) => s.once("drain", r));
    }, { limitMs: 10000 }), (r) => r.closed && (r.status === 0 || r.status === 408 || r.status === 413)],
    ["chunked-encoding garbage", "400", async () => raw((s) => s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nZZZZ\r\nhello\r\n0\r\n\r\n")), (r) => r.status === 400],
    ["body cut mid-JSON (client half-closes)", "closed", async () => raw((s) => s.end(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"prompt":"hel`)), (r) => r.closed && r.status === 0 && r.ms < 2000],
    ["body ends mid-JSON (Content-Length honest)", "400 not valid JSON", () => post("/v1/completions", '{"model":"hostile","prompt":"hel'), errIs(400, "not valid JSON")],
    ["invalid UTF-8 in a JSON string", "400 not valid JSON", () => post("/v1/completions", Buffer.from('{"prompt":"ab\xff\xfe","max_tokens":4}', "latin1")), errIs(400, "unable to decode byte")],
    ["nesting 100,000 deep", "400 parsing depth", () => post("/v1/completions", B.deep), errIs(400, "maximum parsing depth")],
    ["number 1e400", "400 overflow", () => post("/v1/completions", '{"prompt":"x","max_tokens":4,"temperature":1e400}'), errIs(400, "real number overflow")],
    ["NaN", "400 invalid token", () => post("/v1/completions", '{"prompt":"x","max_tokens":4,"temperature":NaN}'), errIs(400, "invalid token")],
    ["duplicate keys", "400 duplicate key", () => post("/v1/completions", '{"prompt":"x","max_tokens":4,"max_tokens":4000}'), errIs(400, "duplicate object key")],
    ["n: 100000", "400 names n", () => post("/v1/completions", comp({ n: 100000 })), errIs(400, '"param":"n"')],
    ["max_tokens: 2^31", "400 names max_tokens", () => post("/v1/completions", comp({ max_tokens: 2 ** 31 })), errIs(400, '"param":"max_tokens"')],
    ["max_tokens: 2^31-1", "400 context length", () => post("/v1/completions", comp({ max_tokens: 2 ** 31 - 1 })), errIs(400, "maximum context length")],
    ["100,000 logit_bias entries", "400 names logit_bias", () => post("/v1/completions", B.bias), errIs(400, '"param":"logit_bias"')],
    ["10,000 stop strings", "400 names stop", () => post("/v1/completions", B.stop), errIs(400, '"param":"stop"')],
    ["10 MB of messages", "400 context length, fast", () => post("/v1/chat/completions", B.msgs), (r) => errIs(400, "maximum context length")(r) && r.text.includes('"param":"messages"') && r.ms < 3000],
    ["10 MB prompt, one word", "400 context length, fast", () => post("/v1/completions", B.word), (r) => errIs(400, "maximum context length")(r) && r.ms < 3000],
    // /tokenize's body limit follows the context (api.h): 10 MB is refused before it is read; 3 MB
    // is read, then refused before it is tokenized.
    ["/tokenize 10 MB prompt", "413 before the body", async () => raw((s) => s.write(`POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 10000000\r\n\r\n{"prompt":"aaaa`)), (r) => r.status === 413 && r.text.includes("/tokenize") && r.ms < 1000],
    ["/tokenize 3 MB prompt", "400 context length", () => post("/tokenize", B.tok), (r) => errIs(400, "maximum context length")(r) && r.text.includes('"param":"prompt"') && r.ms < 3000],
    ["/detokenize 1,000,000 ids", "400 names tokens", () => post("/detokenize", B.detok), (r) => errIs(400, '"param":"tokens"')(r) && r.ms < 3000],
    ["schema: $ref chain 2,000 deep", "400 names guided_json", () => post("/v1/completions", B.refs), errIs(400, '"param":"guided_json"')],
    ["schema: $ref cycle", "400 names the cycle", () => post("/v1/completions", comp({ guided_json: { $defs: { a: { $ref: "#/$defs/b" }, b: { $ref: "#/$defs/a" } }, $ref: "#/$defs/a" } })), errIs(400, "cycle")],
    ["schema: enum of 200,000", "400 enum limit", () => post("/v1/completions", B.enum), errIs(400, "'enum'")],
    ["schema: allOf of 24 anyOf (2^24)", "400 names allOf", () => post("/v1/completions", comp({ guided_json: { allOf: Array.from({ length: 24 }, (_, i) => ({ anyOf: [{ type: "object", properties: { [`a${i}`]: { type: "string" } } }, { type: "object", properties: { [`b${i}`]: { type: "integer" } } }] })) } })), errIs(400, "allOf")],
    ["schema: anyOf through 40 $refs (2^40 paths)", "200 in budget (shared nodes)", () => {
        const defs = {};
        for (let i = 0; i < 40; i++) defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i + 1}` }, { type: "array", items: { $ref: `#/$defs/d${i + 1}` } }] };
        defs.d40 = { type: "string" };
        return post("/v1/completions", comp({ guided_json: { $defs: defs, $ref: "#/$defs/d0" } }));
    }, (r) => (r.status === 200 || errIs(400, "guided_json")(r)) && r.ms < 3000],
    ["regex (x{1000}){1000}", "400 NFA limit", () => post("/v1/completions", comp({ guided_regex: "(x{1000}){1000}" })), errIs(400, "NFA states")],
    ["regex [a-z]{1,100000}", "400 NFA limit", () => post("/v1/completions", comp({ guided_regex: "[a-z]{1,100000}" })), errIs(400, "NFA states")],
    ["regex (a|b)*a(a|b){30} (2^30-state DFA)", "200 in budget (lazy DFA)", () => post("/v1/completions", comp({ guided_regex: "(a|b)*a(a|b){30}", max_tokens: 32 })), (r) => r.status === 200 && r.ms < 3000],
    ["regex ((a+)+)+b", "200 in budget", () => post("/v1/completions", comp({ guided_regex: "((a+)+)+b", max_tokens: 16 })), (r) => r.status === 200 && r.ms < 3000],
    // Each request dropped 2 ms after it is sent (queued, or prefilling), 50 a second (50x the
    // good client's rate). Unpaced, any flood (even of GET /health) starves the good client of
    // CPU on a 2-core machine shared with the attacker: glint has no per-address request-rate
    // limit. The engine's cancel path in each phase is checked by the attacks below.
    ["flood of 120 cancels at 25/s (dropped after 2 ms)", "nothing left running", async () => {
        const a0 = await aborts();
        await Promise.all(Array.from({ length: 1 }, async () => {
            for (let i = 0; i < 120; i++) await Promise.all([sleep(40), post("/v1/completions", comp({ max_tokens: 500, ignore_eos: true, stream: true }), { abortAfterMs: 2, limitMs: 5000 })]);
        }));
        const t0 = Date.now();
        while ((await busy()) > 1 && Date.now() - t0 < 5000) await sleep(50);
        const left = await busy(); // the good client's request may be running
        return { status: 0, text: "", ms: 0, note: `${(await aborts()) - a0} aborts, ${left} left`, ok: left <= 1 };
    }],
    ["disconnect while queued", "abort counted", async () => {
        await good.gap();
        const a0 = await aborts();
        // 16 running (--max-num-seqs) from one n=16 request, then 2 queued behind it; all dropped.
        const big = post("/v1/completions", comp({ n: 16, max_tokens: 3000, ignore_eos: true }), { abortAfterMs: 350 });
        await sleep(80);
        const q = [0, 1].map(() => post("/v1/completions", comp({ max_tokens: 100 }), { abortAfterMs: 240 }));
        let waiting = 0;
        for (let i = 0; i < 12 && waiting < 1; i++) {
            waiting = await metric("vllm:num_requests_waiting");
            await sleep(20);
        }
        await Promise.all([big, ...q]);
        const a1 = await abortsReach(a0 + 18);
        return { status: 0, text: "", ms: 0, note: `${waiting} waiting seen, ${a1 - a0} aborts`, ok: waiting >= 1 && a1 - a0 >= 18 };
    }],
    ["disconnect while prefilling (3,000-token prompt)", "abort counted", async () => {
        await good.gap();
        const a0 = await aborts();
        await post("/v1/completions", comp({ prompt: "hello ".repeat(3000), max_tokens: 200 }), { abortAfterMs: 120 });
        const a1 = await abortsReach(a0 + 1);
        return { status: 0, text: "", ms: 0, note: `${a1 - a0} aborts`, ok: a1 - a0 === 1 };
    }],
    ["disconnect while decoding (not streamed)", "abort counted", async () => {
        const a0 = await aborts();
        await post("/v1/completions", comp({ max_tokens: 3000, ignore_eos: true }), { abortAfterMs: 300 });
        const a1 = await abortsReach(a0 + 1);
        return { status: 0, text: "", ms: 0, note: `${a1 - a0} aborts`, ok: a1 - a0 === 1 };
    }],
    ["disconnect while streaming", "abort counted", async () => {
        const a0 = await aborts();
        const r = await post("/v1/chat/completions", json({ model: NAME, messages: [{ role: "user", content: "hi" }], max_tokens: 3000, ignore_eos: true, stream: true }), { abortAfterMs: -1, stream: true });
        const a1 = await abortsReach(a0 + 1);
        return { status: r.status, text: "", ms: r.ms, note: `${a1 - a0} aborts`, ok: a1 - a0 === 1 };
    }],
    [COMPILE_ATTACK, "no request left behind", async () => {
        await good.gap(); // the compile spends up to a core-second (its budget) by design
        const a0 = await aborts();
        await post("/v1/completions", B.compile, { abortAfterMs: 100 });
        // Either the compile ends within its budget and the submitted request is aborted, or it
        // failed: nothing may stay running for this attacker.
        await abortsReach(a0 + 1, 4000);
        const t0 = Date.now();
        while ((await busy()) > 1 && Date.now() - t0 < 3000) await sleep(50);
        const left = await busy();
        return { status: 0, text: "", ms: 0, note: `${(await aborts()) - a0} aborts, ${left} running+waiting after`, ok: left <= 1 };
    }],
];

let good;
let current = "(none)"; // the attack running, for the good client's slow requests

async function main() {
    if (!MODEL) throw new Error("usage: hostile.mjs MODEL.gguf");
    prebuild();
    const args = ["--served-model-name", NAME, "--threads", "1", "--max-num-seqs", "16", "--max-waiting", "64", "--deep-health-interval", "0", "--timeout-headers", String(T_HEADERS), "--timeout-body", String(T_BODY), "--timeout-keep-alive", String(T_KEEPALIVE), "--limit-concurrency-per-ip", String(PER_IP)];
    srv = await startServer({ model: MODEL, args, env: { VLLM_API_KEY: "" } });
    const pid = srv.proc.pid;
    console.log(`# hostile: glint serve pid ${pid} at ${srv.base}; attackers from ${ATT}; baseline ${BASELINE_S} s`);

    good = new Good();
    await sleep(BASELINE_S * 1000 + 300);
    const base = (await good.stop()).slice(1); // the first request compiles the chat grammar
    const baseMs = base.map((r) => r.ms);
    const baseP99 = p99(baseMs);
    good = new Good();
    const rssStart = rssMiB(pid), smapsStart = smapsMiB(pid);
    // Read between attacks, some of which leave the server closing connections: one retry.
    const cacheMiB = async () => (await metric("glint:grammar_cache_bytes").catch(() => sleep(100).then(() => metric("glint:grammar_cache_bytes")))) / 1048576;
    const cacheStart = await cacheMiB();
    for (const [name, expected, run, okFn] of attacks) {
        const before = rssMiB(pid), cacheBefore = await cacheMiB();
        current = name;
        let r;
        try {
            r = await withTimeout(run(), 20000, name);
        } catch (e) {
            r = { status: 0, text: String(e?.message ?? e), ms: NaN, ok: false };
        }
        const alive = srv.proc.exitCode === null && srv.proc.signalCode === null;
        const ok = alive && (typeof r.ok === "boolean" ? r.ok : okFn(r));
        const got = r.note ?? (r.status ? `${r.status}` : r.closed ? "closed" : "no answer");
        if (name === COMPILE_ATTACK) {
            // Its compile outlives the client (2.5-4 s of CPU here, more on a loaded machine):
            // wait for its grammar to reach the cache (at most 10 s), then for the trim.
            const t0 = Date.now();
            while ((await cacheMiB()) < cacheBefore + 1 && Date.now() - t0 < 10000) await sleep(100);
            await sleep(TRIM_WAIT_MS);
        }
        rows.push({ name, expected, got, ms: r.ms, before, after: rssMiB(pid), cache: (await cacheMiB()) - cacheBefore, ok });
        if (!ok) {
            failures++;
            console.log(`FAIL ${name}: got ${got} ${tail(r.text, 300)}${alive ? "" : " (server died)"}`);
        }
        if (!alive) break;
    }
    const att = await good.stop();
    const attMs = att.map((r) => r.ms);
    const attP99 = p99(attMs);
    // A second baseline after the attacks: the machine's load drifts over the ~2 minutes of the
    // suite (other builds and tests on 2 cores), so the limit uses the larger of the two. (A
    // server the attacks left slow would raise the second one too; it is printed, not judged: on
    // this shared machine the load alone moved it from 111 to 618 ms in one run.)
    good = new Good();
    await sleep(BASELINE_S * 1000 + 300);
    const after = await good.stop();
    const afterP99 = p99(after.map((r) => r.ms));
    const limit = 3 * Math.max(baseP99, afterP99, FLOOR_MS);

    const pad = (s, n) => String(s).padEnd(n);
    const f = (x) => (Number.isFinite(x) ? x.toFixed(0) : "-");
    console.log(`| ${pad("attack", 46)} | ${pad("expected", 42)} | ${pad("got", 34)} | ms    | RSS MiB before/after | ok |`);
    console.log(`|${"-".repeat(48)}|${"-".repeat(44)}|${"-".repeat(36)}|-------|----------------------|----|`);
    for (const r of rows) console.log(`| ${pad(r.name, 46)} | ${pad(r.expected, 42)} | ${pad(r.got, 34)} | ${pad(f(r.ms), 5)} | ${pad(`${f(r.before)} / ${f(r.after)}`, 20)} | ${r.ok ? "ok" : "NO"} |`);
    const goodFail = [...base, ...att, ...after].filter((r) => !r.ok);
    console.log(`# good client: baseline ${base.length} requests p99 ${f(baseP99)} ms, after the attacks ${after.length} p99 ${f(afterP99)} ms; under attack ${att.length} requests p99 ${f(attP99)} ms (max ${f(Math.max(...attMs))}); limit 3 x max(${f(baseP99)}, ${f(afterP99)}, ${FLOOR_MS}) = ${f(limit)} ms; failures ${goodFail.length}`);
    // Where the growth is: compiled grammars the attacks left in the cache (charged at their real
    // size, bounded by --grammar-cache-bytes), each attack's share, and the kinds of memory.
    await sleep(TRIM_WAIT_MS);
    const cacheGrowth = (await cacheMiB()) - cacheStart, rssEnd = rssMiB(pid), smapsEnd = smapsMiB(pid);
    console.log(`# server RSS: ${f(rssStart)} MiB before the attacks, ${f(rssEnd)} MiB after: +${f(rssEnd - rssStart)} MiB, of which the grammar cache grew ${f(cacheGrowth)} MiB (bounded by --grammar-cache-bytes); the other ${f(rssEnd - rssStart - cacheGrowth)} MiB are outside it`);
    // An attack's share: RSS after it minus RSS after the one before (what a trim gave back in
    // between counts for the attack that freed it), so the shares add up to the growth.
    rows.forEach((r, i) => (r.share = r.after - (i ? rows[i - 1].after : rssStart)));
    const shares = rows.filter((r) => Math.abs(r.share) >= 3 || Math.abs(r.cache) >= 1);
    const rest = rows.filter((r) => !shares.includes(r)).reduce((a, r) => a + r.share, 0);
    console.log(`# RSS by attack (MiB, the grammar cache's part in brackets): ${shares.map((r) => `${r.name} ${r.share >= 0 ? "+" : ""}${f(r.share)} [${f(r.cache)}]`).join("; ")}; the other ${rows.length - shares.length} attacks ${rest >= 0 ? "+" : ""}${f(rest)} together`);
    if (smapsStart && smapsEnd)
        console.log(`# RSS by kind (/proc/PID/smaps, MiB, before -> after): ${Object.keys(smapsStart).map((k) => `${k} ${f(smapsStart[k])} -> ${f(smapsEnd[k])}`).join(", ")}`);
    // Regression check (issue 25): the abandoned 2 MB schema's transient memory (its JSON trees
    // and compile scratch, ~65 MiB) must go back; what stays is the grammar it left in the cache
    // plus at most what may wait for a trim (GL_TRIM_MIN_BYTES, 16 MiB) and 8 MiB of slack.
    // Without the trim (GLINT_MALLOC_TRIM=0) it was +75 MiB with 14 in the cache.
    const cr = rows.find((r) => r.name === COMPILE_ATTACK);
    if (cr && !(cr.after - cr.before <= cr.cache + COMPILE_SLACK_MIB)) {
        console.log(`FAIL ${COMPILE_ATTACK}: RSS +${f(cr.after - cr.before)} MiB > its grammar cache share ${f(cr.cache)} + ${COMPILE_SLACK_MIB} MiB: the compile's freed memory did not go back`);
        failures++;
    }
    console.log(`# baseline ms: ${baseMs.map(f).join(" ")}`);
    const slow = [...att].sort((a, b) => b.ms - a.ms).slice(0, 4);
    console.log(`# slowest under attack: ${slow.map((g) => `${f(g.ms)} ms (${g.during})`).join("; ")}`);
    for (const g of goodFail.slice(0, 5)) console.log(`FAIL good client request: ${g.error} after ${f(g.ms)} ms`);
    if (goodFail.length) failures++;
    if (att.length < 10 || base.length < BASELINE_S - 3) {
        console.log(`FAIL good client: too few requests (${base.length} baseline, ${att.length} under attack)`);
        failures++;
    }
    if (!(attP99 <= limit)) {
        console.log(`FAIL good client p99 ${f(attP99)} ms under attack > ${f(limit)} ms`);
        failures++;
    }
    const h = await fetch(`${srv.base}/health`).then((r) => r.status).catch(() => 0);
    if (h !== 200) {
        console.log(`FAIL server unhealthy after the attacks: /health ${h}`);
        failures++;
    }
    await limitCheck();
    await rateCheck();
    // A clean SIGTERM exit after the attacks: a sanitizer build reports leaks and errors here.
    srv.proc.kill("SIGTERM");
    const ex = await withTimeout(srv.exited, 40000, "exit after SIGTERM").catch(() => null);
    await srv.stop();
    const san = /(AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error)[^\n]*/.exec(srv.log());
    console.log(`# server exit after SIGTERM: ${ex ? `code ${ex.code} signal ${ex.signal}` : "none within 40 s"}${san ? `; sanitizer: ${san[0]}` : ""}`);
    if (!ex || ex.code !== 0 || san) {
        console.log(`FAIL server exit after SIGTERM: ${tail(srv.log(), 2000)}`);
        failures++;
    }
    console.log(failures ? `hostile: ${failures} FAILED` : "hostile: OK");
    process.exit(failures ? 1 : 0);
}

// --limit-concurrency on a second small server: the connection past the limit gets 503.
async function limitCheck() {
    const b = await startServer({ model: MODEL, args: ["--served-model-name", NAME, "--threads", "1", "--deep-health-interval", "0", "--limit-concurrency", "8", "--timeout-headers", "5"], env: { VLLM_API_KEY: "" } });
    const held = [];
    for (let i = 0; i < 8; i++) {
        const s = net.connect({ host: "127.0.0.1", port: b.port, localAddress: `127.0.0.${3 + i}` });
        await new Promise((r) => s.once("connect", r));
        held.push(s);
    }
    await sleep(100);
    const r = await raw(() => {}, { port: b.port, localAddress: "127.0.0.20", limitMs: 3000 });
    for (const s of held) s.destroy();
    const ok = r.status === 503 && r.text.includes("--limit-concurrency") && r.ms < 1000;
    console.log(`# --limit-concurrency 8: the 9th connection got ${r.status || (r.closed ? "closed" : "nothing")} in ${r.ms.toFixed(0)} ms`);
    if (!ok) {
        console.log(`FAIL limit-concurrency: want 503 at once, got ${tail(r.text, 300)}`);
        failures++;
    }
    await b.stop();
}

// --limit-request-rate-per-ip on a third small server: a flood of GET /health from one address
// (8 keep-alive connections, 600 requests) gets 429s with Retry-After, while another address at
// 10 requests/s, under the limit, gets only 200s and keeps its latency (its p99 within 2 x
// max(its p99 before the flood, 125 ms): the floor of the main test, for the same reason).
async function rateCheck() {
    const RATE = 20, BURST = 40;
    const c = await startServer({ model: MODEL, args: ["--served-model-name", NAME, "--threads", "1", "--deep-health-interval", "0", "--limit-request-rate-per-ip", String(RATE), "--limit-request-burst-per-ip", String(BURST)], env: { VLLM_API_KEY: "" } });
    const get = (agent, localAddress) => new Promise((resolve) => {
        const t0 = performance.now();
        const req = http.get({ host: "127.0.0.1", port: c.port, path: "/health", localAddress, agent }, (res) => {
            res.resume();
            res.on("end", () => resolve({ status: res.statusCode, retry: res.headers["retry-after"], ms: performance.now() - t0 }));
        });
        req.setTimeout(5000, () => req.destroy());
        req.on("error", () => resolve({ status: 0, ms: performance.now() - t0 }));
    });
    const other = async (n) => {
        const out = [];
        for (let i = 0; i < n; i++) {
            out.push(await get(undefined, "127.0.0.1"));
            await sleep(100);
        }
        return out;
    };
    const base = await other(10);
    const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
    let left = 600;
    const flood = [];
    const worker = async () => {
        while (left-- > 0) flood.push(await get(agent, ATT));
    };
    const [during] = await Promise.all([other(15), Promise.all(Array.from({ length: 8 }, worker))]);
    agent.destroy();
    const limited = flood.filter((r) => r.status === 429);
    const badRetry = limited.filter((r) => !(Number(r.retry) >= 1));
    const p = (a) => p99(a.map((r) => r.ms));
    const limit = 2 * Math.max(p(base), FLOOR_MS);
    const otherBad = [...base, ...during].filter((r) => r.status !== 200);
    const metricsText = await fetch(`${c.base}/metrics`).then((r) => r.text()).catch(() => "");
    const counted = Number(/^glint:rate_limited_requests_total\{[^}]*\} (\S+)/m.exec(metricsText)?.[1] ?? NaN);
    console.log(`# --limit-request-rate-per-ip ${RATE} (burst ${BURST}): flood of ${flood.length} from ${ATT}: ${flood.length - limited.length} x 200, ${limited.length} x 429 (metric ${counted}); 127.0.0.1 at 10/s: ${otherBad.length} not 200, p99 ${p(base).toFixed(0)} ms before, ${p(during).toFixed(0)} ms during (limit ${limit.toFixed(0)})`);
    const ok = limited.length >= 400 && badRetry.length === 0 && flood.length - limited.length >= BURST && otherBad.length === 0 && p(during) <= limit && counted === limited.length;
    if (!ok) {
        console.log("FAIL rate-limit-per-ip: want >= 400 flood requests answered 429 with Retry-After, the burst admitted, every other-address request 200 within the latency limit, the metric equal to the 429s");
        failures++;
    }
    await c.stop();
}

main().catch((e) => {
    console.log(`FAIL hostile.crash: ${e?.stack ?? e}`);
    process.exit(1);
});
