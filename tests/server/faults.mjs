// SPDX-License-Identifier: MIT
// Faults with nothing lost (tests/server/check_faults.sh): every accepted request completes
// exactly as it would alone, or gets an explicit error. Four servers on the tiny model:
//   ref    --max-num-seqs 1: every request runs alone (the reference replies); 48 KV pages
//   tight  a 40-page KV pool (80 KiB) with --max-num-seqs 64: far too small for 64 sequences
//   term   receives SIGTERM with 48 streams in flight
//   fault  GLINT_FAULT_STEP=100: engine step 100 fails (server.c's injection point)
// The references cost one engine step per token (batch 1), so the requests are short (6-10 new
// tokens after ~70 prompt tokens; a quarter chat, with the framing grammar): ~30 s in all.
// Checks (each would fail if its feature broke):
//   kv.exhaustion_identical    64 concurrent requests (completions and chat, streamed and not,
//       greedy and seeded temperature 1, some n=2) on tight; preemptions must rise; every reply
//       (text, finish_reason, usage) equals the same request's reply on ref; then 0 running,
//       0 pages held, kv_cache_usage_perc 0.
//   kv.cannot_fit_is_400       on tight, prompt + max_tokens (or max_tokens unset) that no pool
//       of 40 pages can hold: HTTP 400 naming the pool, at once -- not a hang, not an early
//       "length".
//   kv.long_prompt_split       on ref (48 pages), a 600-token prompt whose first 512-token chunk
//       alone overflows the pool but whose sequence fits: it completes (finish length, 8
//       tokens), not "abort".
//   sigterm.drain_32_streams   on term (--max-num-seqs 16) 16 blocker streams run and 32
//       streams wait behind them, SIGTERM: all 48 finish, the 32 with the reply they have
//       alone; a new TCP connection is refused (ECONNREFUSED: the listening socket is closed at
//       once, serving.md §4; uvicorn behind vLLM does the same); a new request on a connection
//       opened before SIGTERM gets 503 "Shutting down" (that socket was accepted earlier; an
//       answer beats a hang); exit code 0.
//   finish.length_is_honest    on term before its SIGTERM (max_model_len 160): prompt >=
//       max_model_len -> 400; prompt + max_tokens > max_model_len -> 400 (vLLM's check and
//       wording, not a silent cap); max_tokens unset -> "length" exactly at max_model_len;
//       max_tokens 7 -> "length" after 7; stop_token_ids -> "stop" at the first occurrence,
//       stop_reason = the id.
//   sigterm.drain_timeout_explicit  ref (--shutdown-timeout 1) gets SIGTERM with one stream
//       running and a stream and a non-streamed request queued: when the drain time runs out
//       what is unfinished gets an explicit 503 (error event + [DONE]; HTTP 503), exit code 0.
//   fault.engine_error_explicit  step 100 of fault fails mid-generation: the stream that was
//       generating gets its tokens, then an SSE error event {"error": {...}} and [DONE] (what
//       vLLM's serving layer does when its generator raises), never a finish_reason; the
//       non-streamed request gets HTTP 500 with an error object; /health turns 503 and a new
//       request gets 503.
//   node tests/server/faults.mjs MODEL.gguf      (GLINT_BIN, default build/glint)
// Env: GL_FAULTS_ONLY=regex runs the matching checks only; GL_VERBOSE=1 prints details;
// GL_FAULTS_SANITIZER=1 (with a sanitizer GLINT_BIN) adds sanitizer.clean: every server exits 0
// after SIGTERM with no ASan/LSan/UBSan report; GL_FAULTS_LOGDIR=DIR keeps the servers' logs.
// Under the Debug ASan build the timed checks run past their limits (measured: kv and the
// 32-stream drain need > 90 s); sanitizer.clean still holds there.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { connectResult, startServer, streamPost, http, waitIdle, getMetrics, metricValue, assembleChat, assembleCompletion, withTimeout, sleep, short, tail, expectError } from "./lib.mjs";

const MODEL = process.argv[2] ?? process.env.GLINT_MODEL;
const NAME = "faults";
const VERBOSE = !!process.env.GL_VERBOSE;
let failed = 0, passed = 0;
const t0 = Date.now();

function assert(c, msg) {
    if (!c) throw new Error(msg);
}
const ONLY = process.env.GL_FAULTS_ONLY ? new RegExp(process.env.GL_FAULTS_ONLY) : null; // a subset while debugging
async function check(name, fn, timeoutMs = 60000) {
    if (ONLY && !ONLY.test(name)) return;
    const t = Date.now();
    try {
        await withTimeout(Promise.resolve().then(fn), timeoutMs, name);
        passed++;
        console.log(`ok ${name} (${((Date.now() - t) / 1000).toFixed(1)} s)`);
    } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${e?.message ?? e}`);
        if (VERBOSE) console.log(e?.stack);
    }
}

const TOPICS = ["lighthouses", "rivers", "glass", "bees", "maps", "clocks", "salt", "bridges"];
// The 64 requests of the exhaustion check; the first 32 (all streamed) are also the SIGTERM ones.
function requestSet() {
    const out = [];
    for (let i = 0; i < 64; i++) {
        const chat = i % 4 === 1, greedy = Math.floor(i / 2) % 2 === 0, stream = i < 32;
        const n = !chat && !greedy && i % 8 === 2 ? 2 : 1;
        // ~70 prompt tokens and 6-10 new ones: 10+ pages a sequence (the pool holds 64), cheap
        // to run alone (the references cost one step per token).
        const text = `Request ${i}: tell the long history of ${TOPICS[i % 8]} in ${3 + (i % 5)} parts. ` + `The ${TOPICS[(i + 3) % 8]} of the old town were famous far and wide. `.repeat(4);
        const body = { model: NAME, max_tokens: 6 + (i % 5), n, temperature: greedy ? 0 : 1 };
        if (!greedy) body.seed = 1000 + i;
        if (chat) body.messages = [{ role: "user", content: text }];
        else body.prompt = text;
        if (stream) {
            body.stream = true;
            body.stream_options = { include_usage: true };
        }
        out.push({ i, chat, stream, n, body, path: chat ? "/v1/chat/completions" : "/v1/completions" });
    }
    return out;
}

// Runs one request; resolves a normalized reply {choices: [{text, reasoning?, tools?, finish}],
// usage} or {error}. onChunk (streams only) sees each chunk.
async function run(base, q, onChunk) {
    try {
        return await run1(base, q, onChunk);
    } catch (e) {
        return { error: `${e?.message}${e?.cause?.code ? ` (${e.cause.code})` : ""}` };
    }
}
async function run1(base, q, onChunk) {
    if (q.stream) {
        const s = await streamPost(base, q.path, q.body, { timeoutMs: 120000, onChunk: onChunk ? (c, n) => (onChunk(c, n), false) : undefined });
        if (s.status !== 200) return { error: `HTTP ${s.status} ${short(s.text, 200)}` };
        if (s.sse.problems.length) return { error: `SSE: ${s.sse.problems.join("; ")}` };
        const err = s.sse.chunks.find((c) => c.error);
        if (err) return { error: `error event ${short(err, 200)}` };
        if (q.chat) {
            const m = assembleChat(s.sse.chunks);
            return norm(m.choices.map((c) => ({ text: c.content, reasoning: c.reasoning || c.reasoning_content, tools: c.tool_calls.map((t) => t.function), finish: c.finish_reason })), m.usage);
        }
        const m = assembleCompletion(s.sse.chunks);
        return norm(m.choices.map((c) => ({ text: c.text, finish: c.finish_reason })), m.usage);
    }
    const h = await http(base, "POST", q.path, { body: q.body, timeoutMs: 120000 });
    if (h.status !== 200) return { error: `HTTP ${h.status} ${short(h.text, 200)}` };
    const ch = h.json.choices;
    if (q.chat) return norm(ch.map((c) => ({ text: c.message.content ?? "", reasoning: c.message.reasoning ?? c.message.reasoning_content ?? "", tools: (c.message.tool_calls ?? []).map((t) => t.function), finish: c.finish_reason })), h.json.usage);
    return norm(ch.map((c) => ({ text: c.text, finish: c.finish_reason })), h.json.usage);
}
function norm(choices, usage) {
    return {
        choices: choices.map((c) => ({ ...c, reasoning: c.reasoning || "", tools: c.tools ?? [] })),
        usage: usage ? { prompt_tokens: usage.prompt_tokens, completion_tokens: usage.completion_tokens, total_tokens: usage.total_tokens } : null,
    };
}
function sameReply(got, want, what) {
    if (got.error) return `${what}: ${got.error}`;
    if (want.error) return `${what}: the reference failed: ${want.error}`;
    const g = JSON.stringify(got), w = JSON.stringify(want);
    if (g === w) return null;
    return `${what}: differs from its run alone:\n    got  ${short(got, 400)}\n    want ${short(want, 400)}`;
}
const metric = async (base, name) => metricValue((await getMetrics(base)).series, name, { model_name: NAME });
// A raw keep-alive HTTP/1.1 connection: send(text) resolves the next response's status line.
function rawConn(port) {
    return new Promise((resolve, reject) => {
        const s = net.connect({ port, host: "127.0.0.1" }, () => resolve(conn));
        let buf = "", waiter = null, closed = false;
        s.on("data", (d) => {
            buf += d;
            const m = /^HTTP\/1\.1 (\d{3})[^\r]*\r\n([\s\S]*?)\r\n\r\n/.exec(buf);
            if (!m || !waiter) return;
            const len = Number(/content-length:\s*(\d+)/i.exec(m[2])?.[1] ?? 0);
            if (buf.length < m[0].length + len) return;
            const body = buf.slice(m[0].length, m[0].length + len);
            buf = buf.slice(m[0].length + len);
            const w = waiter;
            waiter = null;
            w({ status: Number(m[1]), body });
        });
        s.on("error", (e) => (waiter ? waiter({ status: 0, body: e.code }) : reject(e)));
        s.on("close", () => {
            closed = true;
            if (waiter) waiter({ status: 0, body: "closed" });
        });
        const conn = {
            send(text) {
                return new Promise((res) => {
                    if (closed) return res({ status: 0, body: "closed" });
                    waiter = res;
                    s.write(text);
                });
            },
            close: () => s.destroy(),
        };
    });
}

async function main() {
    if (!MODEL) throw new Error("usage: node tests/server/faults.mjs MODEL.gguf");
    const common = ["--served-model-name", NAME, "--deep-health-interval", "0", "--threads", "1", "--max-waiting", "512"];
    const start = (args, env = {}) => startServer({ model: MODEL, args: [...common, ...args], env: { VLLM_API_KEY: "", ...env } }).then((s) => ({ s }), (e) => ({ e }));
    const faultStart = start(["--max-num-seqs", "4"], { GLINT_FAULT_STEP: "100" });
    // The engine fault as soon as its server is up: its step counter runs while the server
    // idles too (at most 5 steps/s), so the requests must come within seconds.
    let fault = null;
    const faultP = faultStart.then((x) => (fault = x)).then(() => check("fault.engine_error_explicit", async () => {
        if (fault.e) throw fault.e;
        const base = fault.s.base;
        const body = { model: NAME, prompt: "A very long story about a fault", max_tokens: 2000, ignore_eos: true, temperature: 1, seed: 7 };
        const [st, ns] = await Promise.all([
            streamPost(base, "/v1/completions", { ...body, stream: true }, { timeoutMs: 60000 }),
            http(base, "POST", "/v1/completions", { body, timeoutMs: 60000 }),
        ]);
        assert(st.status === 200, `stream: HTTP ${st.status} ${short(st.text)} (the fault hit before the request was admitted? it must arrive before step 100)`);
        assert(!st.sse.problems.length, `stream: ${st.sse.problems.join("; ")}`);
        const chunks = st.sse.chunks, errAt = chunks.findIndex((c) => c.error);
        const toks = chunks.filter((c) => c.choices?.[0]?.text).length;
        assert(errAt >= 0, `stream: no error event after the engine failed; ${chunks.length} chunks, last ${short(chunks[chunks.length - 1])}`);
        assert(errAt === chunks.length - 1 && st.sse.done, `stream: the error event is not the last one before [DONE]`);
        assert(toks >= 1, `stream: no token before the fault (${short(chunks.slice(0, 3))})`);
        const e = chunks[errAt].error;
        assert(typeof e.message === "string" && /engine failure/.test(e.message) && e.code === 500, `stream error event ${short(e)}: want {message: "engine failure: ...", code: 500}`);
        const fr = chunks.map((c) => c.choices?.[0]?.finish_reason).filter((x) => x);
        assert(!fr.length, `stream: finish_reason ${short(fr)} besides the error: a failure must not look like an end`);
        expectError(ns, 500, ["engine failure"], "non-streamed request during the fault: ");
        const h = await http(base, "GET", "/health");
        assert(h.status === 503, `/health after the engine failed: HTTP ${h.status}, want 503`);
        const again = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: "x", max_tokens: 2 } });
        expectError(again, 503, [], "a request after the engine failed: ");
        if (VERBOSE) console.log(`  stream: ${toks} token chunks then ${short(e.message)}`);
    }));
    const [ref, tight, term] = await Promise.all([
        // 48 pages: every reference fits alone (they run one at a time), a 600-token prompt too.
        start(["--max-num-seqs", "1", "--max-model-len", "1024", "--kv-cache-memory", "96KiB", "--shutdown-timeout", "1"]),
        // 40 pages (3 sequences); 64-token steps chunk the ~70-token prompts: growing sequences
        // preempt.
        start(["--max-num-seqs", "64", "--max-model-len", "2048", "--kv-cache-memory", "80KiB", "--max-num-batched-tokens", "64"]),
        start(["--max-num-seqs", "16", "--max-model-len", "160", "--shutdown-timeout", "60"]),
    ]);
    for (const [n, x] of Object.entries({ ref, tight, term })) if (x.e) throw new Error(`server ${n}: ${x.e.message}`);
    if (VERBOSE) console.log(`# servers up in ${((Date.now() - t0) / 1000).toFixed(1)} s`);

    const Q = requestSet();
    // References: each request alone on ref (max-num-seqs 1 runs them one at a time).
    const refP = Promise.all(Q.map((q) => run(ref.s.base, q)));

    // The exhaustion and SIGTERM checks run side by side (both wait for the references).
    const kvP = check("kv.exhaustion_identical", async () => {
        const base = tight.s.base;
        const pre0 = await metric(base, "vllm:num_preemptions_total");
        const got = await Promise.all(Q.map((q) => run(base, q)));
        const pre1 = await metric(base, "vllm:num_preemptions_total");
        const want = await refP;
        const bad = [];
        for (const q of Q) {
            const why = sameReply(got[q.i], want[q.i], `request ${q.i} (${q.chat ? "chat" : "completions"}, ${q.stream ? "stream" : "non-stream"}, ${q.body.temperature ? "seeded" : "greedy"}, n=${q.n})`);
            if (why) bad.push(why);
        }
        const idle = await waitIdle(base, NAME, 10000);
        const usage = await metric(base, "vllm:kv_cache_usage_perc");
        const total = await metric(base, "glint:kv_pages_total");
        if (VERBOSE) console.log(`  ${Q.length} requests, pool ${total} pages, preemptions ${pre0} -> ${pre1}`);
        assert(!bad.length, `${bad.length} of 64 replies differ or failed:\n  ${bad.slice(0, 4).join("\n  ")}`);
        assert(pre1 > pre0, `vllm:num_preemptions_total ${pre0} -> ${pre1}: the ${total}-page pool did not force preemption`);
        assert(idle.ok && usage === 0, `after: running ${idle.running}, waiting ${idle.waiting}, pages held ${idle.held}, kv_cache_usage_perc ${usage}; want 0`);
        console.log(`  kv: 64 requests on ${total} pages, ${pre1 - pre0} preemptions, all identical to their runs alone`);
    }, 90000);

    const termP = check("finish.length_is_honest", async () => {
        const base = term.s.base, L = 160;
        const long = "word ".repeat(200);
        expectError(await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: long, max_tokens: 4 } }), 400, ["prompt"], "prompt over max_model_len: ");
        const p = "Count the stones on the shore";
        const tk = await http(base, "POST", "/tokenize", { body: { model: NAME, prompt: p } });
        const np = tk.json?.count ?? tk.json?.tokens?.length;
        assert(np > 0, `/tokenize: ${short(tk.text)}`);
        expectError(await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: p, max_tokens: L - np + 1 } }), 400, ["max_tokens"], `prompt ${np} + max_tokens ${L - np + 1} > max_model_len ${L}: `);
        // max_tokens unset: up to max_model_len (a ~140-token prompt leaves ~20 to generate).
        const pl = p + " and the sand" + " grain".repeat(130);
        const npl = (await http(base, "POST", "/tokenize", { body: { model: NAME, prompt: pl } })).json?.count;
        assert(npl > 100 && npl < L - 4, `/tokenize of the long prompt: ${npl}`);
        const full = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: pl, ignore_eos: true, temperature: 0 } });
        assert(full.status === 200 && full.json.choices[0].finish_reason === "length" && full.json.usage.completion_tokens === L - npl, `max_tokens unset, prompt ${npl}: HTTP ${full.status} finish ${full.json?.choices?.[0]?.finish_reason} tokens ${full.json?.usage?.completion_tokens}; want length at ${L - npl}`);
        const seven = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: p, max_tokens: 7, ignore_eos: true, temperature: 0, return_token_ids: true } });
        const c7 = seven.json?.choices?.[0];
        assert(c7?.finish_reason === "length" && seven.json.usage.completion_tokens === 7 && c7.token_ids?.length === 7, `max_tokens 7: ${short(seven.text, 300)}`);
        const j = c7.token_ids.indexOf(c7.token_ids[4]);
        const stop = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: p, max_tokens: 7, ignore_eos: true, temperature: 0, stop_token_ids: [c7.token_ids[4]] } });
        const cs = stop.json?.choices?.[0];
        assert(cs?.finish_reason === "stop" && stop.json.usage.completion_tokens === j + 1 && cs.stop_reason === c7.token_ids[4], `stop_token_ids [${c7.token_ids[4]}]: ${short(stop.text, 300)}; want stop after ${j + 1} tokens`);
    }).then(() =>
    check("sigterm.drain_32_streams", async () => {
        const srv = term.s, base = srv.base;
        const S = Q.slice(0, 32);
        const seqs = S.reduce((a, q) => a + q.n, 0); // 36: four of them have n=2
        const pre = await rawConn(srv.port); // opened before SIGTERM, kept alive
        const h0 = await pre.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
        assert(h0.status === 200, `keep-alive /health before SIGTERM: ${h0.status}`);
        // 16 blocker streams (16 tokens each) fill --max-num-seqs 16 first, so the 32 queue
        // behind them and are all inside the server at SIGTERM; the blockers must finish too.
        const B = Array.from({ length: 16 }, (_, k) => ({ i: 100 + k, chat: false, stream: true, n: 1, path: "/v1/completions", body: { model: NAME, prompt: `Blocker ${k}`, max_tokens: 16, ignore_eos: true, temperature: 1, seed: k, stream: true, stream_options: { include_usage: true } } }));
        const blockers = B.map((q) => run(base, q));
        let running, waiting;
        for (const tWait = Date.now(); Date.now() - tWait < 20000; await sleep(10)) {
            const { series } = await getMetrics(base);
            running = metricValue(series, "vllm:num_requests_running", { model_name: NAME });
            if (running >= 16) break;
        }
        const outs = S.map((q) => run(base, q));
        for (const tWait = Date.now(); Date.now() - tWait < 20000; await sleep(10)) {
            const { series } = await getMetrics(base);
            running = metricValue(series, "vllm:num_requests_running", { model_name: NAME });
            waiting = metricValue(series, "vllm:num_requests_waiting", { model_name: NAME });
            if (waiting >= seqs) break;
        }
        srv.proc.kill("SIGTERM");
        const tSig = Date.now();
        await sleep(300);
        const refused = await connectResult(srv.port);
        const late = JSON.stringify({ model: NAME, prompt: "late", max_tokens: 2 });
        const post = await pre.send(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(late)}\r\n\r\n${late}`);
        pre.close();
        const got = await Promise.all(outs);
        const gotB = await Promise.all(blockers);
        const ex = await withTimeout(srv.exited, 60000, "exit after SIGTERM").catch((e) => ({ code: `none (${e.message})` }));
        const want = await refP;
        const bad = [];
        for (const q of S) {
            const why = sameReply(got[q.i], want[q.i], `stream ${q.i}`);
            if (why) bad.push(why);
        }
        if (VERBOSE) console.log(`  at SIGTERM: running ${running}, waiting ${waiting}; exit ${Date.now() - tSig} ms later`);
        assert(running === 16 && waiting === seqs, `at SIGTERM: running ${running}, waiting ${waiting}; want the 16 blockers running and all 32 streams (${seqs} sequences) queued`);
        for (const b of gotB) assert(!b.error && b.choices[0].finish === "length" && b.usage.completion_tokens === 16, `blocker stream: ${short(b)}; want 16 tokens, length`);
        assert(!bad.length, `${bad.length} of 32 streams did not finish as alone:\n  ${bad.slice(0, 4).join("\n  ")}`);
        assert(refused === "ECONNREFUSED", `new connection 300 ms after SIGTERM: ${refused}, want ECONNREFUSED`);
        assert(post.status === 503 && /Shutting down/.test(post.body), `request on a connection opened before SIGTERM: ${post.status} ${short(post.body)}, want 503 Shutting down`);
        assert(ex.code === 0, `exit after SIGTERM: code ${ex.code} signal ${ex.signal}; log ${tail(srv.log(), 300)}`);
    }, 90000));
    await kvP;
    await termP;

    await check("kv.cannot_fit_is_400", async () => {
        const base = tight.s.base;
        const t = Date.now();
        const late = (e) => ({ status: 0, text: `no answer within 15 s (${e.message}): the request was accepted and runs, a pool limit must be refused at once` });
        const big = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: "Too long for this pool", max_tokens: 1500, ignore_eos: true }, timeoutMs: 15000 }).catch(late);
        expectError(big, 400, ["pool"], "prompt + max_tokens 1500 on a 40-page pool: ");
        const unset = await http(base, "POST", "/v1/chat/completions", { body: { model: NAME, messages: [{ role: "user", content: "hi" }], stream: true }, timeoutMs: 15000 }).catch(late);
        expectError(unset, 400, ["pool"], "max_tokens unset (up to max_model_len 2048) on a 40-page pool, streamed: ");
        assert(Date.now() - t < 10000, `the refusals took ${Date.now() - t} ms`);
    });

    await check("kv.long_prompt_split", async () => {
        const base = ref.s.base;
        await refP; // ref's own work first: the pool is idle
        // 600 prompt ids: 44 of ref's 48 pages as a sequence, but a first 512-token chunk would hold
        // 128 (each sliding group keeps the blocks of all its positions until committed).
        const ids = Array.from({ length: 600 }, (_, k) => 1000 + ((k * 7919) % 50000));
        const r = await http(base, "POST", "/v1/completions", { body: { model: NAME, prompt: ids, max_tokens: 8, ignore_eos: true, temperature: 0 }, timeoutMs: 60000 });
        assert(r.status === 200, `600-token prompt, 8 tokens, on ref's idle 48-page pool: HTTP ${r.status} ${short(r.text)}`);
        const c = r.json.choices[0];
        assert(c.finish_reason === "length" && r.json.usage.completion_tokens === 8, `600-token prompt: finish_reason ${c.finish_reason}, ${r.json.usage.completion_tokens} tokens; want length after 8`);
        const idle = await waitIdle(base, NAME, 5000);
        assert(idle.ok, `after: pages held ${idle.held}`);
    });
    await check("sigterm.drain_timeout_explicit", async () => {
        const srv = ref.s, base = srv.base;
        await refP; // ref's own work first
        // --max-num-seqs 1: A runs (~150 tokens), B and C wait behind it; the 1 s drain ends
        // before B and C can finish.
        let firstA = false;
        const body = { model: NAME, prompt: "Count the waves", max_tokens: 150, ignore_eos: true, temperature: 1, seed: 9 };
        const A = streamPost(base, "/v1/completions", { ...body, stream: true }, { timeoutMs: 30000, onChunk: () => ((firstA = true), false) });
        await sleep(100);
        const B = streamPost(base, "/v1/completions", { ...body, seed: 10, stream: true }, { timeoutMs: 30000 });
        const C = http(base, "POST", "/v1/completions", { body: { ...body, seed: 11 }, timeoutMs: 30000 }).catch((e) => ({ status: 0, text: `no answer: ${e.message} (${e.cause?.code})` }));
        for (const tw = Date.now(); !firstA && Date.now() - tw < 10000; ) await sleep(10);
        await sleep(100);
        srv.proc.kill("SIGTERM");
        const [a, b, c] = await Promise.all([A, B, C]);
        const ex = await withTimeout(srv.exited, 20000, "exit after SIGTERM").catch((e) => ({ code: `none (${e.message})` }));
        const ends503 = (st, what) => {
            assert(st.status === 200 && !st.sse.problems.length, `${what}: HTTP ${st.status}, SSE ${short(st.sse?.problems)}: a stream must end with [DONE], never be cut`);
            const last = st.sse.chunks[st.sse.chunks.length - 1];
            assert(last?.error?.code === 503 && /shutting down/.test(last.error.message), `${what}: last event ${short(last)}, want an error event (code 503, shutting down) before [DONE]`);
        };
        const aDone = a.sse?.chunks?.some((x) => x.choices?.[0]?.finish_reason === "length");
        if (aDone) assert(!a.sse.problems.length && !a.sse.chunks.some((x) => x.error), `stream A finished and also failed: ${short(a.sse.problems)}`);
        if (!aDone) ends503(a, "running stream A");
        ends503(b, "queued stream B");
        expectError(c, 503, ["shutting down"], "queued non-streamed C: ");
        assert(ex.code === 0, `exit after the drain timeout: code ${ex.code} signal ${ex.signal}`);
        if (VERBOSE) console.log(`  A ${aDone ? "finished" : "got the error"}; B and C got 503`);
    }, 40000);
    await faultP;
    // Every server ends by SIGTERM (the others already did), so that a sanitizer build reports
    // at exit; GL_FAULTS_SANITIZER=1 then requires no AddressSanitizer / LeakSanitizer / UBSan
    // report in any server's output (GL_FAULTS_LOGDIR=DIR keeps the logs).
    for (const x of [ref, tight, term, fault]) if (x?.s && x.s.proc.exitCode === null && x.s.proc.signalCode === null) x.s.proc.kill("SIGTERM");
    const exits = {};
    for (const [n, x] of Object.entries({ ref, tight, term, fault }))
        if (x?.s) exits[n] = await withTimeout(x.s.exited, 60000, `${n} exit`).catch((e) => ({ code: `none (${e.message})` }));
    if (process.env.GL_FAULTS_LOGDIR) {
        fs.mkdirSync(process.env.GL_FAULTS_LOGDIR, { recursive: true });
        for (const [n, x] of Object.entries({ ref, tight, term, fault })) if (x?.s) fs.writeFileSync(path.join(process.env.GL_FAULTS_LOGDIR, `${n}.log`), x.s.log());
    }
    if (process.env.GL_FAULTS_SANITIZER === "1")
        await check("sanitizer.clean", async () => {
            const bad = [];
            for (const [n, x] of Object.entries({ ref, tight, term, fault })) {
                if (!x?.s) continue;
                const hits = x.s.log().split("\n").filter((l) => /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|SUMMARY: \w+Sanitizer/.test(l));
                if (hits.length || exits[n].code !== 0) bad.push(`${n}: exit ${exits[n].code}, ${hits.length} reports ${short(hits.slice(0, 3))}`);
            }
            assert(!bad.length, bad.join("; "));
        });
    console.log(`faults: ${passed} passed, ${failed} failed (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    process.exit(failed ? 1 : 0);
}
main().catch((e) => {
    console.log(`FAIL faults.crash: ${e?.stack ?? e}`);
    process.exit(1);
});
