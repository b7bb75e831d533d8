// SPDX-License-Identifier: MIT
// The well-behaved client of tests/hostile/hostile.mjs, in its own process so that the attackers'
// work (building 10 MB bodies, 1,000 sockets) never delays its timing. From 127.0.0.1 (the
// default source address for a 127.0.0.1 server) it sends one chat completion per second with
// the official openai SDK, on a fixed schedule (a slow answer does not delay the next request),
// and reports each result to the parent: {type: "result", ok, ms, error}. On {type: "stop"} it
// waits for the requests in flight (bounded by the SDK timeout) and exits.
// argv: BASE_URL MODEL_NAME
import { OpenAI } from "../server/lib.mjs";

const [base, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", maxRetries: 0, timeout: 20000 });
const inflight = new Set();
let stopping = false;

async function one() {
    const t0 = performance.now();
    try {
        const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Say hello." }], max_tokens: 8, temperature: 0 });
        const ok = r?.choices?.length === 1 && typeof r.choices[0].message?.content === "string";
        process.send({ type: "result", ok, ms: performance.now() - t0, error: ok ? null : "bad shape" });
    } catch (e) {
        process.send({ type: "result", ok: false, ms: performance.now() - t0, error: String(e?.status ?? "") + " " + (e?.message ?? e) });
    }
}

const timer = setInterval(() => {
    if (stopping) return;
    const p = one().finally(() => inflight.delete(p));
    inflight.add(p);
}, 1000);

process.on("message", async (m) => {
    if (m?.type !== "stop") return;
    stopping = true;
    clearInterval(timer);
    await Promise.allSettled([...inflight]);
    process.send({ type: "stopped" }, () => process.exit(0));
});
process.on("disconnect", () => process.exit(0));
