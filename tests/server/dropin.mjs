// SPDX-License-Identifier: MIT
// Drop-in checks for `glint serve` (issue 19): what clients moving from vLLM send.
//   node tests/server/dropin.mjs MODEL.gguf     (GLINT_BIN as for suite.mjs)
// - The official openai SDK's own helpers with zod (tests/oracle's pinned openai and zod):
//   chat.completions.parse + zodResponseFormat on realistic extraction schemas, zodFunction tools
//   with tool_choice "required" and their parsed_arguments, and chat.completions.stream whose
//   deltas must reassemble into the parsed message. Every finished reply is judged by zod (the
//   SDK's parse) and by ajv against the schema that was sent; replies cut by max_tokens are
//   counted, never judged, and each case needs at least one finished reply.
// - Pydantic: tests/server/pydantic_dropin.py (python3-pydantic 1.10 + python3-jsonschema).
// - Request fields: hosted-platform and unknown fields accepted and named in
//   X-Glint-Ignored-Fields (streaming too), output-changing fields implemented (checked against
//   independent computations) or refused by name, --strict-request-fields restoring the 400s.
// - Tracing (X-Request-Id, request_id) and usage details (cached_tokens, reasoning_tokens).
// Prints `PASS name` / `FAIL name: why`, then `N passed, M failed`; exits 1 on any failure.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import { isDeepStrictEqual } from "node:util";
import os from "node:os";
import path from "node:path";
import { OpenAI, ROOT, startServer, runGlint, http, streamPost, assembleChat, getMetrics, metricValue, schemaValidator, withTimeout, short, tail, T } from "./lib.mjs";

const requireOracle = createRequire(path.join(ROOT, "tests/oracle/package.json"));
const { z } = requireOracle("zod");
const { zodResponseFormat, zodFunction } = requireOracle("openai/helpers/zod");

const MODEL = process.argv[2] || process.env.GLINT_MODEL;
if (!MODEL) {
    console.error("usage: node tests/server/dropin.mjs MODEL.gguf");
    process.exit(2);
}
const NAME = "glimmer-dropin";
const ONLY = process.env.GL_SUITE_ONLY ? new RegExp(process.env.GL_SUITE_ONLY) : null;
const SEEDS = [1, 2];
const EOM = 200007, MESSAGE = 200023; // <|eom|>, <|message|>

let passed = 0, failed = 0;
function finish() {
    console.log(`${passed} passed, ${failed} failed`);
    process.exit(failed ? 1 : 0);
}
setTimeout(() => {
    console.log(`FAIL dropin.deadline: over ${T(240000) / 1000} s`);
    failed++;
    finish();
}, T(240000)).unref();
async function check(name, fn, timeoutMs = 60000) {
    if (ONLY && !ONLY.test(name)) return;
    try {
        await withTimeout(Promise.resolve().then(fn), timeoutMs, "check");
        passed++;
        console.log(`PASS ${name}`);
    } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${String(e?.message ?? e).replace(/\s*\n\s*/g, " | ").slice(0, 1500)}`);
    }
}
function assert(c, msg) {
    if (!c) throw new Error(msg);
}
const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
// The SDK's helpers throw LengthFinishReasonError for a reply cut by max_tokens: null for those
// (counted, never judged), the reply otherwise.
async function unlessCut(p) {
    try {
        return await p;
    } catch (e) {
        if (e.constructor?.name === "LengthFinishReasonError") return null;
        throw e;
    }
}

// ---- realistic extraction schemas (zod 4) ----
const Contact = z.object({
    name: z.string().max(24),
    email: z.email().max(32).nullable(),
    phone: z.string().regex(/^\+?[0-9]{6,12}$/).nullable(),
    company: z.string().max(20).nullable(),
});
const Order = z.object({
    order_id: z.string().regex(/^ORD-[0-9]{4}$/),
    status: z.enum(["pending", "paid", "shipped", "cancelled"]),
    items: z.array(z.object({ sku: z.string().regex(/^[A-Z]{2}[0-9]{3}$/), quantity: z.number().int().min(1).max(9) })).min(1).max(2),
    total: z.number().min(0).max(1000),
});
const Sentiment = z.object({
    label: z.enum(["positive", "negative", "neutral"]),
    confidence: z.number().min(0).max(1),
    aspects: z.array(z.object({ aspect: z.string().max(12), polarity: z.enum(["+", "-"]) })).max(2),
});
const CalendarEvent = z.object({
    title: z.string().max(30),
    date: z.iso.date(),
    start: z.iso.time(),
    attendees: z.array(z.string().max(16)).max(2),
    location: z.string().max(20).nullable(),
});
const Payment = z.object({
    payer: z.string().max(20),
    method: z.union([
        z.object({ type: z.literal("card"), last4: z.string().regex(/^[0-9]{4}$/) }),
        z.object({ type: z.literal("iban"), iban: z.string().regex(/^[A-Z]{2}[0-9]{8}$/) }),
        z.object({ type: z.literal("cash") }),
    ]),
    amount: z.number().int().min(1).max(100000),
});
const Company = z.object({
    name: z.string().max(20),
    address: z.object({ street: z.string().max(24), city: z.string().max(16), country: z.enum(["DE", "FR", "US", "JP"]) }),
    employees: z.array(z.object({ name: z.string().max(16), role: z.enum(["engineer", "sales", "manager"]) })).max(2),
});
const Classification = z.object({
    category: z.enum(["billing", "technical", "account", "other"]),
    subcategory: z.enum(["refund", "outage", "login", "bug"]).nullable(),
    keywords: z.array(z.string().max(10)).max(3),
    urgent: z.boolean(),
});
const Resume = z.object({
    name: z.string().max(20),
    years_experience: z.number().int().min(0).max(50),
    skills: z.array(z.string().max(12)).max(3),
    education: z.array(z.object({ school: z.string().max(20), degree: z.enum(["BSc", "MSc", "PhD"]), year: z.number().int().min(1950).max(2030) })).max(2),
});
const SCHEMAS = { Contact, Order, Sentiment, CalendarEvent, Payment, Company, Classification, Resume };

let srv = null, strict = null, client = null;
const MSG = (what) => [{ role: "user", content: `Extract the ${what} from: "Jane Roe (ACME) ordered 2 items, paid by card, call +4930123456."` }];
// Reasoning budget small so the answer keeps the room (the tiny model's text is random).
const EXTRA = { thinking_token_budget: 8 };

// One extraction: the SDK's parse on several seeds; judged as described at the top.
async function parseRuns(name, schema, maxTokens = 220) {
    const rf = zodResponseFormat(schema, name.toLowerCase());
    const ajv = schemaValidator(rf.json_schema.schema);
    let stops = 0, lengths = 0;
    const runs = await Promise.all(SEEDS.map(async (seed) => {
        try {
            return { r: await client.chat.completions.parse({ model: NAME, messages: MSG(name), response_format: rf, max_tokens: maxTokens, seed, ...EXTRA }) };
        } catch (e) {
            return { e };
        }
    }));
    for (const { r, e } of runs) {
        if (e) {
            if (e.constructor?.name === "LengthFinishReasonError") {
                lengths++;
                continue;
            }
            throw new Error(`${name}: ${e.constructor?.name}: ${short(e.message, 400)}`);
        }
        const m = r.choices[0].message;
        assert(r.choices[0].finish_reason === "stop", `${name}: finish_reason ${r.choices[0].finish_reason}`);
        const doc = JSON.parse(m.content);
        const bad = ajv(doc);
        assert(!bad, `${name}: ajv: ${bad}; content ${short(m.content, 300)}`);
        assert(schema.safeParse(doc).success && same(m.parsed, schema.parse(doc)), `${name}: zod refuses ${short(m.content, 300)}`);
        stops++;
    }
    assert(stops >= 1, `${name}: no reply finished (${lengths} cut at ${maxTokens} tokens)`);
    return { stops, lengths };
}

function runPydantic() {
    const p = spawn("/usr/bin/python3", [path.join(ROOT, "tests/server/pydantic_dropin.py"), srv.base, NAME], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (out += d));
    return new Promise((res) => p.on("close", (code) => res({ code, out })));
}

async function chatRaw(body, headers = {}) {
    return http(srv.base, "POST", "/v1/chat/completions", { body: { model: NAME, ...body }, headers });
}
async function tokenize(prompt, special = true) {
    const r = await http(srv.base, "POST", "/tokenize", { body: { model: NAME, prompt, add_special_tokens: special } });
    assert(r.status === 200, `tokenize: ${r.status} ${short(r.text)}`);
    return r.json.tokens;
}
const ignoredSet = (h) => new Set((h.get("x-glint-ignored-fields") ?? "").split(", ").filter(Boolean));

async function main() {
    console.log(`# glint drop-in checks: model ${MODEL}`);
    const args = ["--served-model-name", NAME, "--max-model-len", "4096", "--max-num-seqs", "8", "--threads", "2", "--enable-prefix-caching", "--generation-config", "vllm", "--deep-health-interval", "0"];
    [srv, strict] = await Promise.all([
        startServer({ model: MODEL, args }),
        startServer({ model: MODEL, args: [...args.slice(0, 2), "--threads", "1", "--deep-health-interval", "0", "--strict-request-fields", "--no-enable-prefix-caching"] }),
    ]);
    client = new OpenAI({ baseURL: srv.base + "/v1", apiKey: "unused", maxRetries: 0, timeout: T(120000) });

    // ---- the SDK's structured-output helpers with zod ----
    // All extractions and the pydantic script start at once (the batch runs them together); the
    // checks then judge them in order.
    const settle = (p) => p.then((v) => ({ v }), (e) => ({ e }));
    const parses = Object.entries(SCHEMAS).map(([name, schema]) => [name, settle(parseRuns(name, schema))]);
    const pydantic = settle(runPydantic());
    for (const [name, p] of parses)
        await check(`sdk.parse_zod.${name}`, async () => {
            const { e } = await p;
            if (e) throw e;
        }, 120000);

    await check("sdk.zod_function_required", async () => {
        // zodFunction sends no description: rendered null as vLLM renders it.
        const tools = [zodFunction({ name: "save_contact", parameters: Contact }), zodFunction({ name: "create_order", parameters: Order })];
        assert(tools.every((t) => t.function.description === undefined), "zodFunction now sends a description: the no-description case is no longer exercised");
        const by = Object.fromEntries(tools.map((t) => [t.function.name, { zod: t.function.name === "save_contact" ? Contact : Order, ajv: schemaValidator(t.function.parameters) }]));
        let calls = 0;
        for (const seed of SEEDS) {
            const r = await unlessCut(client.chat.completions.parse({ model: NAME, messages: MSG("contact or order"), tools, tool_choice: "required", max_tokens: 400, seed, ...EXTRA }));
            if (!r) continue;
            const ch = r.choices[0];
            assert(ch.finish_reason === "tool_calls" && ch.message.tool_calls?.length >= 1, `required: finish ${ch.finish_reason}, ${ch.message.tool_calls?.length ?? 0} calls`);
            for (const tc of ch.message.tool_calls) {
                const t = by[tc.function.name];
                assert(t, `call to unknown tool ${tc.function.name}`);
                const args = JSON.parse(tc.function.arguments);
                const bad = t.ajv(args);
                assert(!bad, `${tc.function.name}: ajv: ${bad}; ${short(tc.function.arguments, 300)}`);
                assert(t.zod.safeParse(args).success && same(tc.function.parsed_arguments, t.zod.parse(args)), `${tc.function.name}: parsed_arguments do not validate: ${short(tc.function.arguments, 300)}`);
                calls++;
            }
        }
        assert(calls >= 1, "no finished tool call in any seed");
    }, 90000);

    await check("sdk.tool_without_description_or_parameters", async () => {
        // vLLM: FunctionDefinition's missing fields are None; a forced call to a function without
        // parameters writes {} (its schema becomes {"type": "object", "properties": {}}).
        const tools = [{ type: "function", function: { name: "ping" } }, { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { tz: { type: "string", maxLength: 8 } }, required: ["tz"], additionalProperties: false } } }];
        const r = await client.chat.completions.create({ model: NAME, messages: MSG("time"), tools, tool_choice: { type: "function", function: { name: "ping" } }, max_tokens: 64, seed: 1, ...EXTRA });
        const tc = r.choices[0].message.tool_calls?.[0];
        assert(r.choices[0].finish_reason === "tool_calls" && tc?.function.name === "ping" && tc.function.arguments === "{}", `named ping: ${short(r.choices[0])}`);
        const a = await client.chat.completions.create({ model: NAME, messages: MSG("time"), tools, max_tokens: 16, seed: 2, ...EXTRA });
        assert(a.choices.length === 1, "auto with description-less tools failed");
    });

    await check("sdk.stream_helper_reassembles", async () => {
        let finished = 0;
        for (const [name, schema] of [["Sentiment", Sentiment], ["Classification", Classification]]) {
            for (const seed of SEEDS) {
                const rf = zodResponseFormat(schema, name.toLowerCase());
                const stream = client.chat.completions.stream({ model: NAME, messages: MSG(name), response_format: rf, max_tokens: 200, seed, stream_options: { include_usage: true }, ...EXTRA });
                let deltas = "";
                stream.on("content.delta", ({ delta }) => (deltas += delta));
                const final = await unlessCut(stream.finalChatCompletion());
                if (!final) continue;
                const m = final.choices[0].message;
                assert(deltas === m.content, `${name} seed ${seed}: deltas ${short(deltas, 120)} != message ${short(m.content, 120)}`);
                const doc = JSON.parse(deltas);
                assert(!schemaValidator(rf.json_schema.schema)(doc) && same(m.parsed, schema.parse(doc)), `${name}: streamed document does not validate: ${short(deltas, 200)}`);
                assert(final.usage?.completion_tokens > 0, "no usage in the stream");
                finished++;
            }
        }
        assert(finished >= 2, `only ${finished} streams finished`);
        // Tool-call argument deltas reassemble into parsed_arguments.
        const tools = [zodFunction({ name: "classify", parameters: Classification })];
        let calls = 0;
        for (const seed of SEEDS) {
            const stream = client.chat.completions.stream({ model: NAME, messages: MSG("ticket"), tools, tool_choice: "required", max_tokens: 200, seed, ...EXTRA });
            let args = "";
            stream.on("tool_calls.function.arguments.delta", (e) => (args += e.arguments_delta));
            const final = await unlessCut(stream.finalChatCompletion());
            if (!final) continue;
            const tc = final.choices[0].message.tool_calls[0];
            const all = final.choices[0].message.tool_calls.map((t) => t.function.arguments).join("");
            assert(args === all, `argument deltas ${short(args, 120)} != final ${short(all, 120)}`);
            assert(same(tc.function.parsed_arguments, Classification.parse(JSON.parse(tc.function.arguments))), "streamed parsed_arguments do not validate");
            calls++;
        }
        assert(calls >= 1, "no streamed tool call finished");
    }, 90000);

    // ---- pydantic (python3-pydantic 1.10, python3-jsonschema), plain HTTP ----
    await check("pydantic.models", async () => {
        const { v, e } = await pydantic;
        if (e) throw e;
        process.stdout.write(v.out.split("\n").filter(Boolean).map((l) => "#   " + l + "\n").join(""));
        const bad = v.out.split("\n").filter((l) => l.startsWith("FAIL"));
        assert(v.code === 0, `pydantic_dropin.py exit ${v.code}: ${bad.length ? bad.join(" | ") : tail(v.out, 800)}`);
    }, 120000);

    // ---- request fields ----
    await check("fields.hosted_and_unknown_ignored", async () => {
        const hosted = { store: true, metadata: { team: "x" }, service_tier: "auto", prompt_cache_key: "k1", safety_identifier: "u-1", user: "u", prediction: { type: "content", content: "x" }, modalities: ["text"], x_vendor_flag: 1 };
        const r = await chatRaw({ messages: MSG("x"), max_tokens: 4, ...hosted });
        assert(r.status === 200, `hosted fields: HTTP ${r.status} ${short(r.text)}`);
        assert(same([...ignoredSet(r.headers)].sort(), Object.keys(hosted).sort()), `X-Glint-Ignored-Fields: ${r.headers.get("x-glint-ignored-fields")}`);
        const s = await streamPost(srv.base, "/v1/chat/completions", { model: NAME, messages: MSG("x"), max_tokens: 4, stream: true, stream_options: { include_usage: true, include_obfuscation: false }, store: false, metadata: {} });
        assert(s.status === 200 && same([...ignoredSet(s.headers)].sort(), ["metadata", "store", "stream_options.include_obfuscation"]), `stream: ${s.status} ${s.headers.get("x-glint-ignored-fields")}`);
        // Through the SDK as a user would write it.
        const { data, response } = await client.chat.completions.create({ model: NAME, messages: MSG("x"), max_tokens: 4, store: true, metadata: { a: "b" }, service_tier: "auto" }).withResponse();
        assert(data.choices.length === 1 && ignoredSet(response.headers).has("service_tier"), `SDK: ${response.headers.get("x-glint-ignored-fields")}`);
        // Negative control: a request with none has no header.
        const n = await chatRaw({ messages: MSG("x"), max_tokens: 2 });
        assert(n.status === 200 && n.headers.get("x-glint-ignored-fields") === null, "header present without ignored fields");
    });

    await check("fields.output_changing_refused_by_name", async () => {
        const cases = { audio: { voice: "alloy", format: "wav" }, web_search_options: {}, functions: [{ name: "f", parameters: {} }], function_call: "auto", logprob_token_ids: [1, 2], bad_words: ["x"], chat_template: "{{ messages }}", repetition_detection: { max_pattern_size: 4 } };
        for (const [k, v] of Object.entries(cases)) {
            const r = await chatRaw({ messages: MSG("x"), max_tokens: 2, [k]: v });
            assert(r.status === 400 && r.json?.error?.param === k, `${k}: HTTP ${r.status} param ${r.json?.error?.param}`);
        }
        const m = await chatRaw({ messages: MSG("x"), max_tokens: 2, modalities: ["text", "audio"] });
        assert(m.status === 400 && m.json.error.param === "modalities", `modalities audio: ${m.status}`);
        // Their defaults are no-ops, as in vLLM.
        const d = await chatRaw({ messages: MSG("x"), max_tokens: 2, bad_words: [], audio: null, watermarking: false, priority: 0 });
        assert(d.status === 200, `defaults: ${d.status} ${short(d.text)}`);
    });

    await check("fields.priority_as_vllm", async () => {
        const r = await chatRaw({ messages: MSG("x"), max_tokens: 2, priority: 5 });
        assert(r.status === 400 && r.json.error.param === "priority" && /Priority scheduling is not enabled/.test(r.json.error.message), `priority 5: ${r.status} ${short(r.text)}`);
    });

    // vLLM's prompt_logprobs: each prompt position after the first scored under the logits of the
    // one before it. The generation's own logprobs are the reference: a greedy completion's
    // tokens sent back as prompt must get the logprobs they were generated with, and rank 1.
    await check("fields.prompt_logprobs", async () => {
        const post = (b) => http(srv.base, "POST", "/v1/completions", { body: { model: NAME, max_tokens: 6, temperature: 0, ...b } });
        const g = await post({ prompt: "The sea is", logprobs: 0, return_token_ids: true });
        assert(g.status === 200, `greedy: ${g.status} ${short(g.text)}`);
        const gen = g.json.choices[0].token_ids, lps = g.json.choices[0].logprobs.token_logprobs, pids = g.json.choices[0].prompt_token_ids;
        const r = await post({ prompt: [...pids, ...gen], max_tokens: 1, prompt_logprobs: 2, add_special_tokens: false });
        assert(r.status === 200, `prompt_logprobs: ${r.status} ${short(r.text)}`);
        const pl = r.json.choices[0].prompt_logprobs;
        assert(Array.isArray(pl) && pl.length === pids.length + gen.length && pl[0] === null, `list of ${pl?.length} for ${pids.length + gen.length} prompt tokens, first ${short(pl?.[0])}`);
        for (let i = 1; i < pl.length; i++) {
            const ids = [...pids, ...gen], e = pl[i][String(ids[i])];
            assert(e && Object.keys(pl[i]).length >= 2 && Object.keys(pl[i]).length <= 3 && Number.isInteger(e.rank) && e.rank >= 1, `position ${i}: ${short(pl[i])}`);
        }
        for (let i = 0; i < gen.length; i++) {
            const e = pl[pids.length + i][String(gen[i])];
            assert(e.rank === 1 && Math.abs(e.logprob - lps[i]) < 0.02, `generated token ${i} (${gen[i]}): prompt logprob ${e.logprob} rank ${e.rank}, generated with ${lps[i]}`);
        }
        // echo with logprobs (vLLM, lm-eval's loglikelihood): the prompt's tokens open the
        // logprobs, the first with null, the others with their prompt logprobs.
        const ids = [...pids, ...gen];
        const ec = await post({ prompt: ids, max_tokens: 2, echo: true, logprobs: 1, add_special_tokens: false });
        const el = ec.json?.choices?.[0]?.logprobs;
        assert(ec.status === 200 && el.tokens.length === ids.length + 2 && el.token_logprobs[0] === null && el.top_logprobs[0] === null && el.text_offset.length === el.tokens.length, `echo: ${ec.status} ${short(el)}`);
        for (let i = 1; i < ids.length; i++)
            assert(Math.abs(el.token_logprobs[i] - pl[i][String(ids[i])].logprob) < 1e-4 && Object.keys(el.top_logprobs[i]).length >= 1 && Object.keys(el.top_logprobs[i]).length <= 2, `echo position ${i}: ${el.token_logprobs[i]} vs ${pl[i][String(ids[i])].logprob}, top ${short(el.top_logprobs[i])}`);
        const ne = await post({ prompt: ids, max_tokens: 2, logprobs: 1, add_special_tokens: false });
        assert(isDeepStrictEqual(ne.json.choices[0].logprobs.token_logprobs, el.token_logprobs.slice(ids.length)), `echo's generated part ${short(el.token_logprobs.slice(ids.length))} vs ${short(ne.json.choices[0].logprobs.token_logprobs)}`);
        // text_offset as vLLM counts it: characters (code points) of the token strings, from 0
        // through the prompt when echoed; in a stream each chunk starts at the text sent before.
        const cumulative = (l, what) => {
            assert(l.text_offset[0] === 0, `${what}: first text_offset ${l.text_offset[0]}`);
            for (let k = 1; k < l.tokens.length; k++) assert(l.text_offset[k] === l.text_offset[k - 1] + [...l.tokens[k - 1]].length, `${what}: text_offset[${k}] ${l.text_offset[k]} after ${short(l.tokens[k - 1])} at ${l.text_offset[k - 1]}`);
        };
        cumulative(el, "echo");
        const nl = (await post({ prompt: "Caf\u00e9 \u00fcber \u4e16\u754c", max_tokens: 12, logprobs: 1, temperature: 1, seed: 5 })).json.choices[0];
        cumulative(nl.logprobs, "generated");
        let sent = "", chunks = 0;
        const sl = await streamPost(srv.base, "/v1/completions", { model: NAME, prompt: "Caf\u00e9 \u00fcber \u4e16\u754c", max_tokens: 12, logprobs: 1, temperature: 1, seed: 5, stream: true }, {
            onChunk: (ch) => {
                const c = ch.choices?.[0], l = c?.logprobs;
                if (l?.tokens?.length) {
                    chunks++;
                    assert(l.text_offset[0] === [...sent].length, `stream chunk ${chunks}: first text_offset ${l.text_offset[0]} after ${[...sent].length} characters`);
                }
                sent += c?.text ?? "";
            },
        });
        assert(sl.status === 200 && chunks > 0 && sent === nl.text, `stream: ${sl.status}, ${chunks} chunks with logprobs, text ${short(sent)} vs ${short(nl.text)}`);
        // echo + logprobs streamed (vLLM): each choice's first chunk opens with the prompt's
        // tokens, offsets from 0 through them; later chunks start at the characters sent. 80
        // prompt tokens take choice 0 three prefill steps (32 prompt-logprob rows a step). With
        // the prefix cache choice 1 waits for choice 0's prompt (srv); without it (the strict
        // server) choice 1 prefills at once and runs ahead, and its chunks wait for the logprobs.
        const long = Array.from({ length: 80 }, (_, i) => ids[i % ids.length]);
        const body = { prompt: long, max_tokens: 5, echo: true, logprobs: 2, n: 2, add_special_tokens: false };
        for (const server of [srv, strict]) {
            const whole = await http(server.base, "POST", "/v1/completions", { body: { model: NAME, temperature: 0, ...body } });
            assert(whole.status === 200 && whole.json.choices.length === 2, `echo n=2: ${whole.status} ${short(whole.text)}`);
            const got = [0, 1].map(() => ({ text: "", tokens: [], lps: [], tops: [], chunks: 0 }));
            const se = await streamPost(server.base, "/v1/completions", { model: NAME, temperature: 0, ...body, stream: true }, {
                onChunk: (ch) => {
                    for (const c of ch.choices ?? []) {
                        const g = got[c.index], l = c.logprobs;
                        if (l?.tokens?.length) {
                            if (g.chunks++ === 0) cumulative(l, `stream choice ${c.index} first chunk`);
                            else assert(l.text_offset[0] === [...g.text].length, `stream choice ${c.index} chunk ${g.chunks}: first text_offset ${l.text_offset[0]} after ${[...g.text].length} characters`);
                            g.tokens.push(...l.tokens), g.lps.push(...l.token_logprobs), g.tops.push(...l.top_logprobs);
                        }
                        g.text += c.text ?? "";
                    }
                },
            });
            assert(se.status === 200, `echo + logprobs + stream: ${se.status} ${short(se.text)}`);
            for (const c of whole.json.choices) {
                const g = got[c.index], w = c.logprobs;
                assert(g.text === c.text && isDeepStrictEqual(g.tokens, w.tokens) && isDeepStrictEqual(g.tops, w.top_logprobs) && g.lps.length === w.token_logprobs.length && g.lps.every((x, k) => (x === null) === (w.token_logprobs[k] === null) && Math.abs(x - w.token_logprobs[k]) < 1e-4), `streamed echo choice ${c.index} (${g.chunks} chunks) vs whole: text ${short(g.text)} / ${short(c.text)}, ${g.tokens.length} / ${w.tokens.length} tokens`);
                assert(w.tokens.length === long.length + 5 && w.token_logprobs[0] === null, `whole choice ${c.index}: ${w.tokens.length} tokens`);
            }
        }
        const c = await chatRaw({ messages: MSG("x"), max_tokens: 2, prompt_logprobs: 0 });
        assert(c.status === 200 && c.json.prompt_logprobs?.length === c.json.usage.prompt_tokens && c.json.prompt_logprobs[0] === null, `chat: top-level prompt_logprobs ${short(c.json.prompt_logprobs?.length)} for ${c.json.usage?.prompt_tokens}`);
        for (const [b, why] of [[{ prompt_logprobs: 1, stream: true }, "stream=True"], [{ prompt_logprobs: -1 }, "max-logprobs"], [{ prompt_logprobs: 21 }, "prompt_logprobs"]]) {
            const x = await chatRaw({ messages: MSG("x"), max_tokens: 2, ...b });
            assert(x.status === 400 && x.json.error.param === "prompt_logprobs" && x.text.includes(why), `${short(b)}: ${x.status} ${short(x.text)}`);
        }
    });

    await check("fields.truncate_prompt_tokens", async () => {
        const prompt = "one two three four five six seven eight nine ten eleven twelve";
        const ids = await tokenize(prompt);
        const post = (b) => http(srv.base, "POST", "/v1/completions", { body: { model: NAME, prompt, max_tokens: 2, return_token_ids: true, ...b } });
        const left = await post({ truncate_prompt_tokens: 5 });
        assert(left.status === 200 && left.json.usage.prompt_tokens === 5 && same(left.json.choices[0].prompt_token_ids, ids.slice(-5)), `left: ${short(left.text)}`);
        const right = await post({ truncate_prompt_tokens: 5, truncation_side: "right" });
        assert(right.status === 200 && same(right.json.choices[0].prompt_token_ids, ids.slice(0, 5)), `right: ${short(right.text)}`);
        const all = await post({ truncate_prompt_tokens: -1 });
        assert(all.status === 200 && all.json.usage.prompt_tokens === ids.length, `-1: ${short(all.text)}`);
        const big = await post({ truncate_prompt_tokens: 4095, max_tokens: 2 });
        assert(big.status === 400 && big.json.error.param === "truncate_prompt_tokens", `over max_model_len - max_tokens: ${big.status}`);
        const c = await chatRaw({ messages: MSG("x"), max_tokens: 2, truncate_prompt_tokens: 7, return_token_ids: true });
        assert(c.status === 200 && c.json.usage.prompt_tokens === 7, `chat: ${short(c.text)}`);
    });

    await check("fields.continue_final_message_and_echo", async () => {
        const messages = [{ role: "user", content: "Describe the sea." }, { role: "assistant", content: "The sea is" }];
        const body = { messages, add_generation_prompt: false, continue_final_message: true, temperature: 0, max_tokens: 8, return_token_ids: true };
        const r = await chatRaw(body);
        assert(r.status === 200, `continue: ${short(r.text)}`);
        // Independently: the prompt glint renders (pinned to python3-jinja2 + transformers' cut by
        // tests/oracle/check_chat_render.sh), completed raw, gives the same tokens.
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "glint-dropin-"));
        fs.writeFileSync(path.join(dir, "req.json"), JSON.stringify(body));
        const g = await runGlint(["chat", "render", path.join(dir, "req.json")]);
        fs.rmSync(dir, { recursive: true, force: true });
        assert(g.code === 0 && g.stdout.endsWith("<|message|>The sea is"), `chat render: ${tail(g.stdout, 80)}`);
        const raw = await http(srv.base, "POST", "/v1/completions", { body: { model: NAME, prompt: g.stdout, add_special_tokens: false, temperature: 0, max_tokens: 8, return_token_ids: true } });
        assert(same(r.json.choices[0].prompt_token_ids, raw.json.choices[0].prompt_token_ids), "chat prompt ids != the rendered prompt's");
        assert(same(r.json.choices[0].token_ids, raw.json.choices[0].token_ids), `continuation ${r.json.choices[0].token_ids} != raw completion ${raw.json.choices[0].token_ids}`);
        const e = await chatRaw({ ...body, echo: true });
        assert(e.json.choices[0].message.content === "The sea is" + (r.json.choices[0].message.content ?? ""), `echo: ${short(e.json.choices[0].message.content)} vs ${short(r.json.choices[0].message.content)}`);
        const es = await streamPost(srv.base, "/v1/chat/completions", { model: NAME, ...body, echo: true, stream: true });
        assert(assembleChat(es.sse.chunks).choices[0].content === e.json.choices[0].message.content, "streamed echo differs");
        // echo with the generation prompt: only an assistant last message is echoed.
        const u = await chatRaw({ messages: MSG("x"), echo: true, max_tokens: 3, seed: 1 });
        const u0 = await chatRaw({ messages: MSG("x"), max_tokens: 3, seed: 1 });
        assert(u.json.choices[0].message.content === u0.json.choices[0].message.content, "echo of a user message changed the reply");
        const both = await chatRaw({ messages, continue_final_message: true, max_tokens: 2 });
        assert(both.status === 400 && both.json.error.param === "continue_final_message", `both: ${both.status}`);
        const none = await chatRaw({ messages, add_generation_prompt: false, max_tokens: 2 });
        assert(none.status === 400 && none.json.error.param === "add_generation_prompt", `no prompt: ${none.status}`);
    });

    await check("fields.strict_request_fields", async () => {
        const post = (b) => http(strict.base, "POST", "/v1/chat/completions", { body: { model: NAME, messages: MSG("x"), max_tokens: 2, ...b } });
        for (const [k, v] of [["store", true], ["metadata", {}], ["nosuch_field", 1]]) {
            const r = await post({ [k]: v });
            assert(r.status === 400 && r.json.error.param === k, `strict ${k}: ${r.status} ${short(r.text)}`);
        }
        const so = await post({ stream: true, stream_options: { include_obfuscation: true } });
        assert(so.status === 400 && so.json.error.param === "stream_options", `strict stream_options: ${so.status}`);
        const u = await post({ user: "x" });
        assert(u.status === 200, `strict user: ${u.status}`);
    });

    // ---- tracing ----
    await check("trace.request_id", async () => {
        const rid = "trace-" + Math.random().toString(36).slice(2, 10);
        const a = await chatRaw({ messages: MSG("x"), max_tokens: 2, request_id: "body-id" }, { "X-Request-Id": rid });
        assert(a.json.id === `chatcmpl-${rid}` && a.headers.get("x-request-id") === rid, `header: id ${a.json.id}, echoed ${a.headers.get("x-request-id")}`);
        const b = await chatRaw({ messages: MSG("x"), max_tokens: 2, request_id: "body-id" });
        assert(b.json.id === "chatcmpl-body-id" && b.headers.get("x-request-id") === null, `body: ${b.json.id}`);
        const c = await http(srv.base, "POST", "/v1/completions", { body: { model: NAME, prompt: "x", max_tokens: 2 }, headers: { "X-Request-Id": rid } });
        assert(c.json.id === `cmpl-${rid}`, `completions: ${c.json.id}`);
        const s = await fetch(srv.base + "/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json", "X-Request-Id": rid }, body: JSON.stringify({ model: NAME, messages: MSG("x"), max_tokens: 3, stream: true }) });
        const text = await s.text();
        const ids = new Set(text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).id));
        assert(s.headers.get("x-request-id") === rid && ids.size === 1 && ids.has(`chatcmpl-${rid}`), `stream: header ${s.headers.get("x-request-id")}, ids ${[...ids]}`);
        const e = await chatRaw({ messages: 5 }, { "X-Request-Id": rid });
        assert(e.status === 400 && e.headers.get("x-request-id") === rid, "not echoed on an error");
        const long = await chatRaw({ messages: MSG("x"), max_tokens: 2 }, { "X-Request-Id": "x".repeat(200) });
        assert(long.status === 400 && long.json.error.param === "X-Request-Id", `200-byte id: ${long.status}`);
    });

    // ---- usage details ----
    await check("usage.reasoning_tokens", async () => {
        // Force the reasoning arm (=self) and count its body independently from the token ids.
        const [self] = await tokenize("=self", false);
        const body = { messages: MSG("x"), max_tokens: 40, seed: 3, logit_bias: { [self]: 100 }, return_token_ids: true, thinking_token_budget: 12 };
        const r = await chatRaw(body);
        const ids = r.json.choices[0].token_ids;
        const start = ids.indexOf(MESSAGE), end = ids.indexOf(EOM);
        assert(start > 0 && end > start, `no reasoning message in ${ids}`);
        const want = end - start - 1;
        assert(r.json.usage.completion_tokens_details.reasoning_tokens === want && want === 12, `reasoning_tokens ${r.json.usage.completion_tokens_details.reasoning_tokens}, body ${want}`);
        const s = await streamPost(srv.base, "/v1/chat/completions", { model: NAME, ...body, stream: true, stream_options: { include_usage: true } });
        assert(assembleChat(s.sse.chunks).usage.completion_tokens_details.reasoning_tokens === want, "stream usage differs");
        const none = await chatRaw({ ...body, thinking_token_budget: 0, logit_bias: {} });
        assert(none.json.usage.completion_tokens_details.reasoning_tokens === 0, "reasoning counted without reasoning");
    });

    await check("usage.cached_tokens", async () => {
        const prompt = "Lighthouse keepers' logs, volume " + Math.random() + ". ".repeat(1) + "The tide rose at dawn and fell at dusk. ".repeat(8);
        const first = await http(srv.base, "POST", "/v1/completions", { body: { model: NAME, prompt, max_tokens: 2 } });
        assert(first.json.usage.prompt_tokens_details.cached_tokens === 0, `fresh prompt cached ${first.json.usage.prompt_tokens_details.cached_tokens}`);
        const before = (await getMetrics(srv.base)).series;
        const s = await streamPost(srv.base, "/v1/completions", { model: NAME, prompt, max_tokens: 2, stream: true, stream_options: { include_usage: true } });
        const after = (await getMetrics(srv.base)).series;
        const hits = metricValue(after, "vllm:prefix_cache_hits_total", { model_name: NAME }) - metricValue(before, "vllm:prefix_cache_hits_total", { model_name: NAME });
        const u = s.sse.chunks.find((c) => c.usage)?.usage;
        assert(u && hits >= 16 && u.prompt_tokens_details.cached_tokens === hits, `cached_tokens ${u?.prompt_tokens_details?.cached_tokens}, prefix_cache_hits_total grew ${hits}`);
    });

    await srv.stop();
    await strict.stop();
    finish();
}

main().catch((e) => {
    console.log(`FAIL dropin.harness: ${e?.stack ?? e}`);
    failed++;
    finish();
});
