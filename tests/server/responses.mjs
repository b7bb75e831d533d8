// SPDX-License-Identifier: MIT
// The Responses API (POST /v1/responses) end to end with the official openai npm SDK and zod
// (tests/oracle/package.json) against `glint serve` on the tiny random-weight model:
// responses.create (string input, items with instructions, function tools with tool_choice
// required -> function_call items whose arguments ajv validates against the tool's parameters, a
// function_call_output round trip), responses.parse with zodTextFormat (output_parsed checked by
// zod's own safeParse and by ajv), responses.stream (events in order, reassembled, final response
// equal to create's for the same seeded request), max_output_tokens -> incomplete, and the 400s
// of a stateless server. Where the Responses request means a chat request, the two must agree
// (same prompt tokens, same seeded output): the chat path is the reference for the translation.
// Usage: node tests/server/responses.mjs MODEL.gguf
import { createRequire } from "node:module";
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { OpenAI, ROOT, startServer, http, expectError, schemaValidator, short, T } from "./lib.mjs";

const requireOracle = createRequire(path.join(ROOT, "tests/oracle/package.json"));
const { z } = requireOracle("zod");
const { zodTextFormat } = requireOracle("openai/helpers/zod");

const MODEL_FILE = process.argv[2];
if (!MODEL_FILE) {
    console.error("usage: node tests/server/responses.mjs MODEL.gguf");
    process.exit(2);
}

let failures = 0;
async function check(name, fn) {
    const t0 = Date.now();
    try {
        await fn();
        console.log(`  ok   responses.${name} (${Date.now() - t0} ms)`);
    } catch (e) {
        failures++;
        console.log(`  FAIL responses.${name}: ${e?.stack ?? e}`);
    }
}
function assert(c, msg) {
    if (!c) throw new Error(msg);
}

// A response object's shape (the fields the SDK's Response type requires).
function checkShape(r, what) {
    assert(/^resp_[0-9a-f]+$/.test(r.id), `${what}: id ${r.id}`);
    assert(r.object === "response", `${what}: object ${r.object}`);
    assert(Number.isInteger(r.created_at), `${what}: created_at`);
    assert(["completed", "incomplete"].includes(r.status), `${what}: status ${r.status}`);
    assert((r.status === "incomplete") === (r.incomplete_details?.reason === "max_output_tokens"), `${what}: incomplete_details ${short(r.incomplete_details)}`);
    assert(r.error === null && Array.isArray(r.output) && Array.isArray(r.tools), `${what}: error/output/tools`);
    const u = r.usage;
    assert(u && u.input_tokens > 0 && u.output_tokens > 0 && u.total_tokens === u.input_tokens + u.output_tokens, `${what}: usage ${short(u)}`);
    assert(Number.isInteger(u.input_tokens_details?.cached_tokens) && Number.isInteger(u.output_tokens_details?.reasoning_tokens), `${what}: usage details ${short(u)}`);
    assert(u.output_tokens_details.reasoning_tokens <= u.output_tokens, `${what}: reasoning tokens over output tokens`);
    for (const it of r.output) {
        assert(["reasoning", "message", "function_call"].includes(it.type), `${what}: item type ${it.type}`);
        if (it.type === "message") {
            assert(it.role === "assistant" && /^msg_/.test(it.id), `${what}: message item ${short(it)}`);
            for (const c of it.content) assert(c.type === "output_text" && typeof c.text === "string" && Array.isArray(c.annotations), `${what}: content ${short(c)}`);
        }
        if (it.type === "reasoning") assert(Array.isArray(it.summary) && it.content?.[0]?.type === "reasoning_text", `${what}: reasoning item ${short(it)}`);
        if (it.type === "function_call") assert(typeof it.call_id === "string" && it.call_id && typeof it.arguments === "string", `${what}: call ${short(it)}`);
    }
    // The SDK's convenience: the concatenated output_text parts.
    const text = r.output.filter((i) => i.type === "message").flatMap((i) => i.content).map((c) => c.text).join("");
    assert(r.output_text === text, `${what}: output_text ${short(r.output_text)} vs ${short(text)}`);
}

// An output item without what the SDK's helpers add (parsed, parsed_arguments).
function plain(it) {
    const c = structuredClone(it);
    delete c.parsed_arguments;
    for (const p of c.content ?? []) delete p.parsed;
    return c;
}

// Drops what differs between two runs of one request (ids, times, call ids).
function comparable(r) {
    const c = structuredClone(r);
    delete c.id;
    delete c.created_at;
    delete c.output_parsed; // the stream helper's
    // the prefix cache's hit depends on what ran before (the second of two equal requests hits)
    if (c.usage?.input_tokens_details) delete c.usage.input_tokens_details.cached_tokens;
    c.output = c.output.map(plain);
    for (const it of c.output) {
        delete it.id;
        delete it.call_id;
    }
    return JSON.stringify(c);
}

const srv = await startServer({ model: MODEL_FILE, args: ["--max-model-len", "2048"] });
// A second server whose engine step 60 fails (server.c's GLINT_FAULT_STEP; its step counter runs
// while idle too, at most 5 steps/s, so its request goes first).
const faulty = await startServer({ model: MODEL_FILE, args: ["--max-model-len", "4096", "--deep-health-interval", "0"], env: { GLINT_FAULT_STEP: "60" } });
const client = new OpenAI({ baseURL: srv.base + "/v1", apiKey: "unused", maxRetries: 0, timeout: T(60000) });
const MODEL = (await client.models.list()).data[0].id;
const THINK = { thinking_token_budget: 8 }; // keeps the tiny model's reasoning short (vLLM extra)

const TOOL = {
    type: "function",
    name: "get_weather",
    description: "Current weather of a city",
    strict: true,
    parameters: {
        type: "object",
        properties: { city: { type: "string", maxLength: 12 }, unit: { type: "string", enum: ["c", "f"] } },
        required: ["city", "unit"],
        additionalProperties: false,
    },
};

try {
    await check("engine_failure_error_event", async () => {
        const fc = new OpenAI({ baseURL: faulty.base + "/v1", apiKey: "unused", maxRetries: 0, timeout: T(60000) });
        const req = { model: (await fc.models.list()).data[0].id, input: "A very long story", max_output_tokens: 3000, temperature: 1, seed: 9 };
        // Two streams in flight when the engine fails: one through the SDK, which ends at the
        // error event (finalResponse() rejects), one read raw, whose last event must be
        // response.failed.
        const sdk = (async () => {
            const s = fc.responses.stream(req);
            const events = [];
            try {
                for await (const ev of s) events.push(ev);
                await s.finalResponse();
            } catch (e) {
                return { events, thrown: e };
            }
            return { events, thrown: null };
        })();
        const raw = fetch(faulty.base + "/v1/responses", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ ...req, stream: true, seed: 10 }) }).then((r) => r.text());
        const [{ events, thrown }, text] = await Promise.all([sdk, raw]);
        assert(thrown, `the SDK saw no failure: last events ${short(events.slice(-2))}`);
        const err = events.findIndex((e) => e.type === "error");
        assert(err > 0 && events[err].code === "server_error" && /fault/.test(events[err].message), `no error event: ${short(events.slice(-2))}`);
        assert(events.some((e) => e.type === "response.output_text.delta"), "no text before the fault (did it hit before admission?)");
        assert(!events.some((e) => e.type === "response.completed" || e.type === "response.incomplete"), "a failure looked like an end");
        const blocks = text.split("\n\n").filter((b) => b).map((b) => JSON.parse(b.split("\n")[1].slice(6)));
        const [e2, last] = blocks.slice(-2);
        assert(e2.type === "error" && last.type === "response.failed" && last.response.status === "failed" && last.response.error.code === "server_error", `raw stream ends with ${short(blocks.slice(-2))}`);
        blocks.forEach((b, i) => assert(b.sequence_number === i, `raw event ${i}: sequence_number ${b.sequence_number}`));
    });
    await faulty.stop();

    await check("create_string_input", async () => {
        const r = await client.responses.create({ model: MODEL, input: "Hello", max_output_tokens: 24, seed: 1, ...THINK });
        checkShape(r, "create");
        assert(r.model === MODEL && r.max_output_tokens === 24 && r.store === false, `echo: ${short(r)}`);
    });

    await check("items_with_instructions_agree_with_chat", async () => {
        const req = {
            model: MODEL,
            instructions: "Answer briefly.",
            input: [
                { role: "developer", content: "Use metric units." },
                { type: "message", role: "user", content: [{ type: "input_text", text: "How warm is Paris?" }] },
            ],
            max_output_tokens: 20,
            temperature: 1,
            seed: 7,
            ...THINK,
        };
        const r = await client.responses.create(req);
        checkShape(r, "items");
        assert(r.instructions === "Answer briefly.", "instructions echoed");
        const chat = await client.chat.completions.create({
            model: MODEL,
            messages: [
                { role: "system", content: "Answer briefly." },
                { role: "system", content: "Use metric units." },
                { role: "user", content: [{ type: "text", text: "How warm is Paris?" }] },
            ],
            max_completion_tokens: 20,
            temperature: 1,
            seed: 7,
            ...THINK,
        });
        assert(chat.usage.prompt_tokens === r.usage.input_tokens, `prompt tokens: chat ${chat.usage.prompt_tokens}, responses ${r.usage.input_tokens}`);
        assert(chat.usage.completion_tokens === r.usage.output_tokens, `output tokens: chat ${chat.usage.completion_tokens}, responses ${r.usage.output_tokens}`);
        const m = chat.choices[0].message;
        assert((m.content ?? "") === r.output_text, `answer: chat ${short(m.content)} vs responses ${short(r.output_text)}`);
        const rs = r.output.find((i) => i.type === "reasoning");
        assert((m.reasoning ?? m.reasoning_content ?? null) === (rs ? rs.content[0].text : null), `reasoning: chat ${short(m.reasoning)} vs ${short(rs)}`);
        // Negative control: a different developer message changes the prompt.
        const other = await client.responses.create({ ...req, input: [{ role: "developer", content: "Use imperial units, always." }, req.input[1]] });
        assert(other.usage.input_tokens !== r.usage.input_tokens, "a longer developer message changed nothing");
    });

    let call = null, callInput = null;
    await check("tools_required_function_calls_validate", async () => {
        const validate = schemaValidator(TOOL.parameters);
        assert(validate({ city: "Paris" }) !== null, "negative control: ajv accepted arguments without unit");
        let complete = 0;
        for (const seed of [1, 2, 3]) {
            const input = [{ role: "user", content: "Weather in Paris?" }];
            const r = await client.responses.create({ model: MODEL, input, tools: [TOOL], tool_choice: "required", max_output_tokens: 160, seed, ...THINK });
            checkShape(r, `tools seed ${seed}`);
            const calls = r.output.filter((i) => i.type === "function_call");
            assert(calls.length >= 1, `seed ${seed}: no function_call item: ${short(r.output)}`);
            assert(!r.output.some((i) => i.type === "message"), `seed ${seed}: tool_choice required but a message: ${short(r.output)}`);
            for (const c of calls) {
                assert(c.name === "get_weather", `seed ${seed}: name ${c.name}`);
                if (c.status !== "completed") continue;
                const err = validate(JSON.parse(c.arguments));
                assert(err === null, `seed ${seed}: arguments ${c.arguments}: ${err}`);
                complete++;
                if (!call) (call = c), (callInput = [...input, ...r.output]);
            }
        }
        assert(complete >= 1, "no completed call in 3 seeds");
    });

    await check("function_call_output_round_trip_agrees_with_chat", async () => {
        assert(call, "no call from the previous check");
        const input = [...callInput, { type: "function_call_output", call_id: call.call_id, output: '{"temp": 21}' }];
        const r = await client.responses.create({ model: MODEL, input, tools: [TOOL], max_output_tokens: 16, seed: 4, ...THINK });
        checkShape(r, "round trip");
        const rs = callInput.find((i) => i.type === "reasoning");
        const calls = callInput.filter((i) => i.type === "function_call");
        const chat = await client.chat.completions.create({
            model: MODEL,
            messages: [
                { role: "user", content: "Weather in Paris?" },
                {
                    role: "assistant",
                    content: null,
                    ...(rs ? { reasoning_content: rs.content[0].text } : {}),
                    tool_calls: calls.map((c) => ({ id: c.call_id, type: "function", function: { name: c.name, arguments: c.arguments } })),
                },
                { role: "tool", tool_call_id: call.call_id, content: '{"temp": 21}' },
            ],
            tools: [{ type: "function", function: { name: TOOL.name, description: TOOL.description, parameters: TOOL.parameters, strict: true } }],
            max_completion_tokens: 16,
            seed: 4,
            ...THINK,
        });
        assert(chat.usage.prompt_tokens === r.usage.input_tokens, `prompt tokens: chat ${chat.usage.prompt_tokens}, responses ${r.usage.input_tokens}`);
        assert((chat.choices[0].message.content ?? "") === r.output_text, `answer differs: ${short(chat.choices[0].message.content)} vs ${short(r.output_text)}`);
    });

    const SCHEMAS = {
        person: z.object({ name: z.string().max(12), age: z.number().int().min(0).max(120), email: z.string().max(16).nullable() }),
        order: z.object({
            status: z.enum(["open", "shipped", "closed"]),
            items: z.array(z.object({ sku: z.string().max(8), qty: z.number().int().min(1).max(9) })).max(2),
        }),
        event: z.object({ kind: z.union([z.literal("meeting"), z.literal("call")]), attendees: z.array(z.string().max(6)).max(2), urgent: z.boolean() }),
        rating: z.object({ stars: z.number().int().min(1).max(5), tags: z.array(z.enum(["fast", "cheap", "good"])).max(3) }),
    };
    await check("parse_zod_text_format", async () => {
        let parsed = 0;
        for (const [name, schema] of Object.entries(SCHEMAS)) {
            const format = zodTextFormat(schema, name);
            const validate = schemaValidator(format.schema);
            for (const seed of [1, 2]) {
                const r = await client.responses.parse({ model: MODEL, input: `Extract the ${name}.`, text: { format }, max_output_tokens: 240, seed, ...THINK });
                checkShape(r, `${name} seed ${seed}`);
                if (r.status !== "completed") continue;
                assert(r.output_parsed !== null && r.output_parsed !== undefined, `${name}: no output_parsed: ${short(r.output_text)}`);
                const z1 = schema.safeParse(r.output_parsed);
                assert(z1.success, `${name} seed ${seed}: zod rejects ${short(r.output_parsed)}: ${short(z1.error?.issues)}`);
                const err = validate(JSON.parse(r.output_text));
                assert(err === null, `${name} seed ${seed}: ajv: ${err}`);
                parsed++;
            }
        }
        assert(parsed >= 6, `only ${parsed} of 8 parse runs completed`);
        // Negative control: zod rejects a document the grammar would not allow.
        assert(!SCHEMAS.order.safeParse({ status: "lost", items: [] }).success, "zod accepted an invalid order");
    });

    await check("json_object_format", async () => {
        const r = await client.responses.create({ model: MODEL, input: "JSON please", text: { format: { type: "json_object" } }, max_output_tokens: 200, seed: 3, ...THINK });
        checkShape(r, "json_object");
        if (r.status === "completed") {
            const v = JSON.parse(r.output_text);
            assert(v && typeof v === "object" && !Array.isArray(v), `not an object: ${short(r.output_text)}`);
        }
    });

    await check("stream_reassembles_and_equals_create", async () => {
        const reqs = [
            { model: MODEL, input: "Tell me a story", max_output_tokens: 40, seed: 11, thinking_token_budget: 12 },
            { model: MODEL, input: [{ role: "user", content: "Weather in Paris?" }], tools: [TOOL], tool_choice: "required", max_output_tokens: 160, seed: 2, ...THINK },
            { model: MODEL, input: "Extract the order.", text: { format: zodTextFormat(SCHEMAS.order, "order") }, max_output_tokens: 240, seed: 1, ...THINK },
        ];
        const KNOWN = new Set([
            "response.created", "response.in_progress", "response.output_item.added", "response.output_item.done",
            "response.content_part.added", "response.content_part.done", "response.output_text.delta", "response.output_text.done",
            "response.reasoning_text.delta", "response.reasoning_text.done", "response.function_call_arguments.delta",
            "response.function_call_arguments.done", "response.completed", "response.incomplete",
        ]);
        for (const req of reqs) {
            const created = await client.responses.create(req);
            const stream = client.responses.stream(req);
            const events = [];
            for await (const ev of stream) events.push(ev);
            const fin = await stream.finalResponse();
            assert(events.length >= 4 && events[0].type === "response.created" && events[1].type === "response.in_progress", `first events ${short(events.slice(0, 2))}`);
            events.forEach((ev, i) => {
                assert(ev.sequence_number === i, `event ${i} has sequence_number ${ev.sequence_number}`);
                assert(KNOWN.has(ev.type), `unknown event type ${ev.type}`);
            });
            const last = events[events.length - 1];
            assert(last.type === (fin.status === "incomplete" ? "response.incomplete" : "response.completed"), `last event ${last.type} for status ${fin.status}`);
            // Deltas reassemble into the final items.
            const text = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("");
            assert(text === fin.output_text, `text deltas ${short(text)} vs ${short(fin.output_text)}`);
            for (const [k, it] of fin.output.entries()) {
                const added = events.find((e) => e.type === "response.output_item.added" && e.output_index === k);
                const done = events.find((e) => e.type === "response.output_item.done" && e.output_index === k);
                assert(added && done && added.item.id === it.id && JSON.stringify(done.item) === JSON.stringify(plain(it)), `item ${k}: ${short(done?.item)} vs ${short(it)}`);
                const deltas = events.filter((e) => e.output_index === k && e.type.endsWith(".delta")).map((e) => e.delta).join("");
                const whole = it.type === "function_call" ? it.arguments : it.type === "reasoning" ? it.content[0].text : it.content[0].text;
                assert(deltas === whole, `item ${k} (${it.type}): deltas ${short(deltas)} vs ${short(whole)}`);
            }
            checkShape(fin, "stream final");
            const [a, b] = [comparable(fin), comparable(created)];
            let at = 0;
            while (at < a.length && a[at] === b[at]) at++;
            assert(a === b, `stream vs create differ at ${at}:\n  ${a.slice(Math.max(0, at - 80), at + 200)}\n  ${b.slice(Math.max(0, at - 80), at + 200)}`);
            if (req.text && fin.status === "completed") assert(isDeepStrictEqual(fin.output_parsed, JSON.parse(created.output_text)), `parsed differs: ${short(fin.output_parsed)} vs ${short(created.output_text)}`);
        }
    });

    await check("reasoning_items_agree_with_chat", async () => {
        // The random model rarely opens a reasoning message: bias it towards the "=self" header
        // token (as suite.mjs does), which also fills the body, so the budget closes it.
        const t = (await http(srv.base, "POST", "/tokenize", { body: { prompt: "=self", add_special_tokens: false } })).json;
        assert(t.count === 1, `"=self" is ${t.count} tokens`);
        const budget = 6;
        const extra = { max_output_tokens: 40, temperature: 1, seed: 61, thinking_token_budget: budget, logit_bias: { [t.tokens[0]]: 30 } };
        const req = { model: MODEL, input: "Think first.", ...extra };
        const r = await client.responses.create(req);
        checkShape(r, "reasoning");
        const rs = r.output[0];
        assert(rs.type === "reasoning" && rs.content[0].text.length > 0 && rs.summary.length === 0, `first item ${short(rs)}`);
        const { max_output_tokens, ...chatExtra } = extra;
        const chat = (await http(srv.base, "POST", "/v1/chat/completions", { body: { model: MODEL, messages: [{ role: "user", content: "Think first." }], max_tokens: max_output_tokens, ...chatExtra, return_token_ids: true } })).json;
        const m = chat.choices[0].message, ids = chat.choices[0].token_ids;
        assert(m.reasoning === rs.content[0].text && (m.content ?? "") === r.output_text, `chat ${short([m.reasoning, m.content])} vs ${short([rs.content[0].text, r.output_text])}`);
        // reasoning_tokens: the reasoning body only, the tokens strictly between <|message|> and
        // <|eom|> (vLLM counts the tokens between the reasoning markers), from the token ids;
        // chat's usage says the same.
        const open = ids.indexOf(200023), close = ids.indexOf(200007);
        assert(r.usage.output_tokens_details.reasoning_tokens === close - open - 1, `reasoning_tokens ${r.usage.output_tokens_details.reasoning_tokens}, token ids say ${close - open - 1}`);
        assert(chat.usage.completion_tokens_details?.reasoning_tokens === close - open - 1, `chat reasoning_tokens ${short(chat.usage)}`);
        // Streamed: reasoning_text events build the same item.
        const s = client.responses.stream(req);
        const deltas = [];
        for await (const ev of s) if (ev.type === "response.reasoning_text.delta") deltas.push(ev.delta);
        const fin = await s.finalResponse();
        assert(deltas.join("") === rs.content[0].text && comparable(fin) === comparable(r), `streamed reasoning ${short(deltas.join(""))} vs ${short(rs.content[0].text)}`);
        // The output items sent back as input render as chat's assistant message with reasoning.
        const next = await client.responses.create({ model: MODEL, input: [{ role: "user", content: "Think first." }, ...r.output, { role: "user", content: "Again." }], max_output_tokens: 4, seed: 1 });
        const chat2 = await client.chat.completions.create({
            model: MODEL,
            messages: [{ role: "user", content: "Think first." }, { role: "assistant", content: r.output_text, reasoning_content: rs.content[0].text }, { role: "user", content: "Again." }],
            max_tokens: 4,
            seed: 1,
        });
        assert(next.usage.input_tokens === chat2.usage.prompt_tokens, `round trip prompt: ${next.usage.input_tokens} vs chat ${chat2.usage.prompt_tokens}`);
        // Negative control: without the reasoning item the prompt is shorter.
        const bare = await client.responses.create({ model: MODEL, input: [{ role: "user", content: "Think first." }, r.output[1], { role: "user", content: "Again." }], max_output_tokens: 4, seed: 1 });
        assert(bare.usage.input_tokens < next.usage.input_tokens, "dropping the reasoning item changed nothing");
    });

    await check("max_output_tokens_incomplete", async () => {
        const req = { model: MODEL, input: "Write a long essay", max_output_tokens: 3, seed: 5 };
        const r = await client.responses.create(req);
        checkShape(r, "incomplete");
        assert(r.status === "incomplete" && r.incomplete_details.reason === "max_output_tokens" && r.usage.output_tokens === 3, `status ${r.status} ${short(r.usage)}`);
        const s = client.responses.stream(req);
        const types = [];
        for await (const ev of s) types.push(ev.type);
        assert(types.at(-1) === "response.incomplete", `stream ends with ${types.at(-1)}`);
    });

    await check("stateless_and_bad_input_400s", async () => {
        const post = (extra) => http(srv.base, "POST", "/v1/responses", { body: { model: MODEL, input: "hi", max_output_tokens: 2, ...extra } });
        for (const [extra, name] of [
            [{ store: true }, "store"],
            [{ previous_response_id: "resp_123" }, "previous_response_id"],
            [{ background: true }, "background"],
            [{ conversation: "conv_1" }, "conversation"],
        ]) {
            const e = expectError(await post(extra), 400, [name, "stateless"], `${name}: `);
            assert(e.param === name, `${name}: param ${e.param}`);
        }
        const bad = await post({ input: [{ role: "user", content: "a" }, { role: "assistant", content: "b" }, { role: "user", content: [{ type: "input_audio", input_audio: {} }] }] });
        assert(expectError(bad, 400, ["input[2].content[0].type"]).param === "input[2].content[0].type", "param of a bad part");
        expectError(await post({ tools: [{ type: "web_search" }] }), 400, ["tools[0].type", "hosted"]);
        // input_image goes to the chat path's media loader (this model has no vision tower).
        // The error names the input item, not the chat message (instructions come first there).
        const img = await post({ instructions: "x", input: [{ role: "user", content: "a" }, { role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,!!" }] }] });
        const ie = expectError(img, 400, ["input[1].content[0].image_url"]);
        assert(ie.param === "input[1].content[0].image_url" && !/messages/.test(ie.message), `input_image: ${short(img.json)}`);
        expectError(await post({ text: { format: { type: "json_schema", name: "x", schema: { type: "object", properties: { a: { type: "strin" } } } } } }), 400, ["text.format.schema"]);
        expectError(await post({ max_output_tokens: 0 }), 400, ["max_output_tokens"]);
        // Too small for the shortest answer: the message speaks the Responses spelling throughout.
        const small = await post({ max_output_tokens: 2, text: { format: { type: "json_schema", name: "x", schema: { type: "object", properties: { a: { type: "string" } }, required: ["a"] } } } });
        const se = expectError(small, 400, ["max_output_tokens", "text.format.schema", "at least"]);
        assert(!/max_tokens|response_format/.test(se.message), `too small: chat spelling in ${short(se.message)}`);
        expectError(await post({ input: [{ type: "item_reference", id: "msg_1" }] }), 400, ["input[0]", "stateless"]);
        expectError(await post({ messages: [] }), 400, ["messages"]);
        // The SDK surfaces these as BadRequestError.
        let thrown = null;
        try {
            await client.responses.create({ model: MODEL, input: "hi", previous_response_id: "resp_1" });
        } catch (e) {
            thrown = e;
        }
        assert(thrown?.status === 400 && /stateless/.test(thrown.message), `SDK: ${thrown}`);
        // Negative control: store false is served.
        const ok = await post({ store: false, include: ["reasoning.encrypted_content"], truncation: "disabled" });
        assert(ok.status === 200, `store false: HTTP ${ok.status} ${short(ok.text)}`);
    });
} finally {
    await srv.stop();
    await faulty.stop();
}
console.log(failures ? `responses: ${failures} FAILED` : "responses: OK");
process.exit(failures ? 1 : 0);
