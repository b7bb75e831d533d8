// SPDX-License-Identifier: MIT
// Soak test for `glint serve`: N concurrent streaming clients (chat and completions, alternating,
// max_tokens 16-48) for D seconds; then 32 clients that disconnect mid-stream.
// Requires: 0 failed requests (non-200, malformed SSE, an error event, no [DONE]); server RSS
// (/proc/PID/status VmRSS) growth from the 20 s sample to the end under 5%; after each phase
// /metrics shows vllm:num_requests_running 0 and glint:kv_pages_held_by_requests 0.
//   node tests/server/load.mjs --url http://127.0.0.1:P --pid PID [--api-key K]
//   node tests/server/load.mjs --model F.gguf                   (starts its own server)
//   options: --clients 64 --duration 60 --disconnects 32 --seed 1
import { modelName, startServer, streamPost, waitIdle, rssKiB, rng, parseArgs, sleep, short } from "./lib.mjs";

const a = parseArgs(process.argv.slice(2));
const CLIENTS = Number(a.clients ?? 64), DURATION = Number(a.duration ?? 60), DISC = Number(a.disconnects ?? 32);
const MODEL = a.model ?? a._[0] ?? process.env.GLINT_MODEL;
const MSGS = [{ role: "user", content: "Tell me a short story about a lighthouse." }];

async function main() {
    let base, pid = a.pid ? Number(a.pid) : null, key = a["api-key"] ?? null, srv = null;
    if (a.url) base = String(a.url).replace(/\/+$/, "").replace(/\/v1$/, "");
    else {
        if (!MODEL) throw new Error("give --url URL --pid PID, or --model F.gguf");
        srv = await startServer({ model: MODEL, args: ["--max-num-seqs", String(a["max-num-seqs"] ?? 16), "--max-waiting", String(Math.max(256, CLIENTS * 2)), "--threads", String(a.threads ?? 2), "--served-model-name", "load", "--deep-health-interval", "0"], env: { VLLM_API_KEY: "" } });
        base = srv.base;
        pid = srv.proc.pid;
    }
    const name = a["model-name"] ?? (await modelName(base, key));
    if (!pid || rssKiB(pid) === null) throw new Error(`cannot read /proc/${pid}/status (give --pid of the server)`);
    console.log(`# load: ${CLIENTS} streaming clients for ${DURATION} s, then ${DISC} disconnecting clients; server ${base} pid ${pid} model ${name}`);

    const st = { ok: 0, failed: 0, tokens: 0, reasons: [] };
    const tEnd = Date.now() + DURATION * 1000;
    async function clientLoop(ci) {
        const r = rng(Number(a.seed ?? 1) * 1000 + ci);
        for (let k = 0; Date.now() < tEnd; k++) {
            const chat = (ci + k) % 2 === 0;
            const body = { model: name, stream: true, stream_options: { include_usage: true }, max_tokens: 16 + Math.floor(r() * 33), temperature: 1, seed: ci * 100000 + k };
            if (chat) body.messages = MSGS;
            else body.prompt = "Once upon a time " + ci;
            let why = null, usage = null;
            try {
                const s = await streamPost(base, chat ? "/v1/chat/completions" : "/v1/completions", body, { key, timeoutMs: 120000 });
                if (s.status !== 200) why = `HTTP ${s.status} ${short(s.text, 200)}`;
                else if (s.sse.problems.length) why = `SSE: ${s.sse.problems.join("; ")}`;
                else {
                    const err = s.sse.chunks.find((c) => c.error);
                    if (err) why = `error event ${short(err, 200)}`;
                    usage = s.sse.chunks[s.sse.chunks.length - 1]?.usage;
                    if (!why && !usage) why = "no usage chunk";
                }
            } catch (e) {
                why = `stream error: ${e?.cause?.code ?? e?.message}`;
            }
            if (why) {
                st.failed++;
                if (st.reasons.length < 10) st.reasons.push(`${chat ? "chat" : "completions"} client ${ci}: ${why}`);
            } else {
                st.ok++;
                st.tokens += usage.completion_tokens;
            }
        }
    }
    const rss0 = rssKiB(pid);
    const t0 = Date.now();
    const sampleAt = Math.min(20, DURATION / 3) * 1000;
    let rss20 = null;
    const sampler = sleep(sampleAt).then(() => (rss20 = rssKiB(pid)));
    await Promise.all([...Array.from({ length: CLIENTS }, (_, i) => clientLoop(i)), sampler]);
    const wall = (Date.now() - t0) / 1000;
    const idle1 = await waitIdle(base, name, 20000);
    const rssEnd = rssKiB(pid);
    const growth = (100 * (rssEnd - rss20)) / rss20;
    console.log(`requests ok ${st.ok}, failed ${st.failed}; ${st.tokens} completion tokens in ${wall.toFixed(1)} s (${(st.ok / wall).toFixed(2)} req/s, ${(st.tokens / wall).toFixed(1)} tok/s)`);
    for (const r of st.reasons) console.log("  " + r);
    console.log(`RSS KiB: start ${rss0}, at ${sampleAt / 1000} s ${rss20}, end ${rssEnd}: growth ${growth.toFixed(2)}% (limit 5%)`);
    console.log(`after the load: num_requests_running ${idle1.running}, waiting ${idle1.waiting}, kv_pages_held_by_requests ${idle1.held} (waited ${idle1.waited_ms} ms)`);

    // Disconnect storm: each client reads two events then aborts.
    let aborted = 0, discFailed = 0;
    const reasons2 = [];
    await Promise.all(Array.from({ length: DISC }, async (_, i) => {
        const chat = i % 2 === 0;
        const body = { model: name, stream: true, max_tokens: 1000, temperature: 1, ignore_eos: !chat };
        if (chat) body.messages = MSGS;
        else body.prompt = "A very long story " + i;
        try {
            const s = await streamPost(base, chat ? "/v1/chat/completions" : "/v1/completions", body, { key, onChunk: (_, n) => n >= 1, timeoutMs: 120000 });
            if (s.aborted) aborted++;
            else {
                discFailed++;
                if (reasons2.length < 5) reasons2.push(`client ${i}: finished before disconnecting (HTTP ${s.status} ${short(s.text, 150)})`);
            }
        } catch (e) {
            discFailed++;
            if (reasons2.length < 5) reasons2.push(`client ${i}: ${e?.cause?.code ?? e?.message}`);
        }
    }));
    const idle2 = await waitIdle(base, name, 20000);
    console.log(`disconnects: ${aborted} of ${DISC} clients aborted mid-stream, ${discFailed} failed`);
    for (const r of reasons2) console.log("  " + r);
    console.log(`after the disconnects: num_requests_running ${idle2.running}, waiting ${idle2.waiting}, kv_pages_held_by_requests ${idle2.held} (waited ${idle2.waited_ms} ms)`);
    const alive = await fetch(`${base}/health`).then((r) => r.status, (e) => e.message);
    console.log(`GET /health after all: ${alive}`);
    if (srv) await srv.stop();
    const ok = st.failed === 0 && st.ok > 0 && growth < 5 && idle1.ok && idle2.ok && discFailed === 0 && alive === 200;
    console.log(ok ? "load: OK" : "load: FAILED");
    process.exit(ok ? 0 : 1);
}
main().catch((e) => {
    console.log(`load: FAILED: ${e?.stack ?? e}`);
    process.exit(1);
});
