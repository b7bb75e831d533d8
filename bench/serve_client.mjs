// SPDX-License-Identifier: MIT
// serve_client.mjs: one load run against glint serve or llama-server, the SAME client for both
// (plain fetch, node >= 18), POST /v1/completions, non-streaming, greedy.
//
//   node bench/serve_client.mjs --url http://127.0.0.1:PORT --side glint|llama
//        --mode constrained|free --conc C --requests R --max-tokens M --schema FILE
//   node bench/serve_client.mjs --ttft --url ... --side ... --launch-ms EPOCH_MS [--timeout-s 900]
//
// Load run: R requests, at most C in flight; request i has the prompt "Record i: ..." (distinct
// prompts, so neither server's prefix cache serves one request from another). Constrained: the
// schema goes as `response_format: {type: json_schema, json_schema: {name, schema}}` to glint and
// as `json_schema: schema` to llama-server (its /v1/completions reads only that spelling; its
// response_format is parsed for chat). Free: no schema, ignore_eos on both. One untimed warm-up
// request of 4 tokens in the same mode comes first (glint caches the compiled grammar from it;
// llama-server converts the schema on every request, which is its real cost). Prints one JSON
// line: wall seconds from the first send to the last reply, usage.completion_tokens summed,
// tokens/s = tokens / wall, and per side how many outputs are valid JSON that Ajv accepts against
// the schema (valid), how many ended by the model (finish_reason "stop") and how many hit
// max_tokens ("length").
// TTFT mode: polls GET /health every 50 ms until 200, then streams one 16-token-prompt request
// with max_tokens 1; prints seconds from --launch-ms (the server's launch, taken by the caller)
// to ready and to the first streamed token.
import fs from "node:fs";
import { createRequire } from "node:module";

const require = createRequire(new URL("../tests/oracle/package.json", import.meta.url));
const AjvMod = require("ajv");
const Ajv = AjvMod.default || AjvMod;

const args = process.argv.slice(2);
const opt = (k, d) => {
    const i = args.indexOf(k);
    return i >= 0 ? args[i + 1] : d;
};
const url = opt("--url");
const side = opt("--side");
if (!url || !["glint", "llama"].includes(side)) {
    console.error("usage: serve_client.mjs --url U --side glint|llama ...");
    process.exit(2);
}
const now = () => performance.now() / 1e3;

async function post(body) {
    const r = await fetch(url + "/v1/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
    });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${text.slice(0, 300)}`);
    return JSON.parse(text);
}

async function ttft() {
    const launch = Number(opt("--launch-ms")) / 1e3;
    const deadline = Date.now() + Number(opt("--timeout-s", "900")) * 1e3;
    let ready = 0;
    while (Date.now() < deadline) {
        try {
            const r = await fetch(url + "/health");
            await r.text();
            if (r.status === 200) {
                ready = Date.now() / 1e3;
                break;
            }
        } catch {
            /* not listening yet */
        }
        await new Promise((res) => setTimeout(res, 50));
    }
    if (!ready) throw new Error("server not ready before the timeout");
    const body = {
        prompt: "The quick brown fox jumps over the lazy dog, and then it runs away.",
        max_tokens: 1,
        temperature: 0,
        stream: true,
    };
    const r = await fetch(url + "/v1/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
    });
    if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${(await r.text()).slice(0, 300)}`);
    let first = 0;
    const dec = new TextDecoder();
    for await (const chunk of r.body) {
        const s = dec.decode(chunk);
        if (!first && /"text"\s*:/.test(s)) first = Date.now() / 1e3;
    }
    if (!first) throw new Error("no token streamed");
    console.log(JSON.stringify({ side, ready_s: ready - launch, ttft_s: first - launch,
                                 request_s: first - ready }));
}

async function load() {
    const mode = opt("--mode", "constrained");
    const conc = Number(opt("--conc", "1"));
    const nreq = Number(opt("--requests", String(conc)));
    const maxTokens = Number(opt("--max-tokens", "64"));
    const schema = JSON.parse(fs.readFileSync(opt("--schema"), "utf8"));
    const validate = new Ajv({ strict: false, allErrors: false }).compile(schema);
    const body = (i, n) => {
        const b = {
            prompt: `Record ${i}: the inventory item below, as one JSON object.\n`,
            max_tokens: n,
            temperature: 0,
            stream: false,
        };
        if (mode === "constrained") {
            if (side === "glint")
                b.response_format = { type: "json_schema", json_schema: { name: "item", schema } };
            else b.json_schema = schema;
        } else {
            b.ignore_eos = true;
        }
        return b;
    };
    await post(body(1000, 4)); // warm-up, untimed
    const out = [];
    let next = 0;
    const t0 = now();
    async function worker() {
        while (next < nreq) {
            const i = next++;
            const a = now();
            const r = await post(body(i, maxTokens));
            const ch = r.choices[0];
            let ok = false;
            try {
                ok = validate(JSON.parse(ch.text));
            } catch {
                ok = false;
            }
            out.push({ i, s: now() - a, tokens: r.usage.completion_tokens, finish: ch.finish_reason,
                       valid: ok, text: ch.text.slice(0, 200) });
        }
    }
    await Promise.all(Array.from({ length: conc }, worker));
    const wall = now() - t0;
    const tokens = out.reduce((s, o) => s + o.tokens, 0);
    console.log(JSON.stringify({
        side, mode, conc, requests: nreq, max_tokens: maxTokens, wall_s: wall, tokens,
        tps: tokens / wall, valid: out.filter((o) => o.valid).length,
        stop: out.filter((o) => o.finish === "stop").length,
        length: out.filter((o) => o.finish === "length").length,
        sample: out.sort((a, b) => a.i - b.i)[0].text,
    }));
}

(args.includes("--ttft") ? ttft() : load()).catch((e) => {
    console.error("serve_client: " + e.message);
    process.exit(1);
});
