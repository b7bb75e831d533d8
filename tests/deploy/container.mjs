// SPDX-License-Identifier: MIT
// HTTP checks of a glint container that scripts/image-test.sh started (the image's own
// entrypoint, host network, loopback port). Two phases:
//   serve   --base URL
//       /health 200; a chat completion through the official openai SDK under a JSON schema,
//       every "stop" reply validated by ajv (2020 dialect; a corrupted copy must fail it: the
//       negative control); /metrics in Prometheus text with vLLM's series, and its request and
//       token counters moved by the requests made here.
//   sigterm --base URL --engine podman|docker --name CONTAINER
//       a streaming completion of 600 tokens (ignore_eos); after its first chunk,
//       `ENGINE kill --signal TERM CONTAINER`; the stream must go on after the signal and end
//       with all 600 tokens and finish_reason "length" (the drain), and a new connection during
//       the drain must be refused. The exit code is the caller's to check (`ENGINE wait`).
// Prints one line per check; exits 1 on any failure.
import { spawn } from "node:child_process";
import { OpenAI, connectResult, http, parseArgs, parseMetrics, metricValue, schemaValidator, short, streamPost } from "../server/lib.mjs";

const a = parseArgs(process.argv.slice(2));
const phase = a._[0];
const base = String(a.base ?? "");
const failures = [];
const check = (ok, what) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
    if (!ok) failures.push(what);
};

const SCHEMA = {
    type: "object",
    properties: {
        name: { type: "string", maxLength: 8 },
        age: { type: "integer", minimum: 0, maximum: 120 },
        ok: { type: "boolean" },
    },
    required: ["name", "age", "ok"],
    additionalProperties: false,
};

async function servePhase() {
    const h = await http(base, "GET", "/health");
    check(h.status === 200, `GET /health: ${h.status}`);
    const models = await http(base, "GET", "/v1/models");
    const model = models.json?.data?.[0]?.id;
    check(model === "glint-tiny-random", `GET /v1/models: the default model is served as ${short(model)}`);

    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60000 });
    const validate = schemaValidator(SCHEMA);
    const finishes = [];
    let stopDoc = null;
    // Random weights: some seeds fill the string up to max_tokens; a few seeds give a "stop".
    for (const seed of [11, 12, 13, 14, 15, 16]) {
        const r = await client.chat.completions.create({
            model,
            messages: [{ role: "user", content: "Describe a person as JSON." }],
            max_tokens: 96,
            temperature: 1,
            seed,
            thinking_token_budget: 16,
            response_format: { type: "json_schema", json_schema: { name: "person", schema: SCHEMA, strict: true } },
        });
        const c = r.choices[0];
        finishes.push(c.finish_reason);
        if (c.finish_reason !== "stop") continue;
        let doc, why;
        try {
            doc = JSON.parse(c.message.content ?? "");
            why = validate(doc);
        } catch (e) {
            why = `not JSON: ${e.message}`;
        }
        check(!why, `chat under a JSON schema (seed ${seed}): ${short(c.message.content, 120)} ${why ? `INVALID: ${why}` : "valid (ajv)"}`);
        stopDoc ??= doc;
    }
    check(stopDoc !== null, `chat under a JSON schema: at least one of 6 seeds ends with "stop" (${finishes.join(",")})`);
    if (stopDoc) check(validate({ ...stopDoc, age: -1 }) !== null, "negative control: ajv rejects the reply with age -1");

    const m = await http(base, "GET", "/metrics");
    const series = parseMetrics(m.text ?? "");
    const bad = series.filter((s) => s.name === null);
    check(m.status === 200 && series.length > 0 && bad.length === 0, `GET /metrics: ${m.status}, ${series.length} series, ${bad.length} unparsable lines`);
    const ok = metricValue(series, "vllm:request_success_total") ?? 0;
    const gen = metricValue(series, "vllm:generation_tokens_total") ?? 0;
    check(ok >= finishes.length, `/metrics vllm:request_success_total ${ok} >= the ${finishes.length} requests made`);
    check(gen > 0, `/metrics vllm:generation_tokens_total ${gen} > 0`);
    for (const name of ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"])
        check(metricValue(series, name) !== undefined, `/metrics has ${name}`);
}


async function sigtermPhase() {
    const engine = String(a.engine), name = String(a.name);
    const N = 600;
    // The kill runs asynchronously so that chunk arrival times stay generation times: chunks that
    // arrive 200 ms after `kill` returned were generated after the signal reached glint.
    let kill = null, killedAt = null, late = 0, refused = null;
    const body = { model: "glint-tiny-random", prompt: "The sea", max_tokens: N, ignore_eos: true, temperature: 1, seed: 3, stream: true, stream_options: { include_usage: true } };
    const r = await streamPost(base, "/v1/completions", body, {
        timeoutMs: 90000,
        onChunk: (chunk, i) => {
            if (i === 0)
                kill = new Promise((resolve) => {
                    const k = spawn(engine, ["kill", "--signal", "TERM", name], { stdio: ["ignore", "ignore", "pipe"] });
                    let err = "";
                    k.stderr.on("data", (d) => (err += d));
                    k.on("error", (e) => resolve(`${engine} kill: ${e.message}`));
                    k.on("close", (code) => {
                        if (code === 0) killedAt = Date.now();
                        resolve(code === 0 ? null : `${engine} kill: status ${code} ${err}`);
                    });
                });
            else if (killedAt !== null && Date.now() > killedAt + 200 && chunk.choices?.length) {
                // A new connection while this stream still runs: the listener closed at SIGTERM.
                if (late++ === 0) refused = connectResult(Number(new URL(base).port));
            }
            return false;
        },
    });
    const killErr = kill ? await kill : "no first chunk";
    check(!killErr, `${engine} kill --signal TERM ${name} after the first chunk${killErr ? `: ${killErr}` : ""}`);
    const chunks = r.sse?.chunks ?? [];
    const usage = chunks.find((c) => c.usage)?.usage;
    const finish = chunks.flatMap((c) => c.choices ?? []).find((c) => c.finish_reason)?.finish_reason;
    check(r.status === 200 && r.sse?.done && r.sse.problems.length === 0, `the stream is well formed and ends with data: [DONE] (status ${r.status}${r.sse?.problems.length ? `; ${r.sse.problems[0]}` : ""})`);
    check(usage?.completion_tokens === N && finish === "length", `the stream in flight at SIGTERM finished: ${usage?.completion_tokens} of ${N} tokens, finish_reason ${finish}`);
    check(late > 0, `${late} chunks arrived more than 200 ms after the signal was sent (the request was in flight)`);
    const conn = await refused;
    check(conn === "ECONNREFUSED", `a new connection during the drain: ${conn} (want ECONNREFUSED: the listener closes at SIGTERM)`);
}

const run = { serve: servePhase, sigterm: sigtermPhase }[phase];
if (!run || !base) {
    console.error("usage: node tests/deploy/container.mjs serve|sigterm --base URL [--engine E --name C]");
    process.exit(2);
}
run()
    .catch((e) => check(false, `${phase}: ${e?.stack ?? e}`))
    .finally(() => {
        console.log(`container ${phase}: ${failures.length ? `FAILED (${failures.length})` : "OK"}`);
        process.exit(failures.length ? 1 : 0);
    });
