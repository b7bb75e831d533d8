// SPDX-License-Identifier: MIT
// Structured output through `glint serve` on real-world schemas: a deterministic (seeded) sample
// of MaskBench schemas (jsonschemabench maskbench-dev) sent as response_format json_schema at
// temperature 1. Schemas the server refuses with 400 (unsupported keyword) are counted apart;
// every reply that ends with finish_reason "stop" must validate under ajv 8 (2020 dialect,
// ajv-formats, strict off; "$schema" dropped as in tests/oracle/grammar_validate.mjs) and hold
// no special-token or ATEM header text. Prints the counts; exits 1 on any invalid stop reply or
// any response other than 200/400.
//   node tests/server/guided200.mjs --model F.gguf            (starts its own server)
//   node tests/server/guided200.mjs --url http://127.0.0.1:P [--api-key K]
//   options: --n 200 --seed 1 --concurrency 8 --max-tokens 256 --thinking-budget 16 (0: omit)
//            --dir MASKBENCH_DIR (default: extracted from $GLINT_SHARED, else ../shared,
//            data/jsonschemabench/maskbench-dev.tar.gz, via tests/oracle/grammar_lib.sh)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { ROOT, OpenAI, modelName, startServer, framingProblem, schemaValidator, shuffled, parseArgs, short } from "./lib.mjs";

// python3-jsonschema verdict (validator chosen by $schema, format checker on): null when valid,
// else the first error. Used only where ajv cannot compile the schema.
function pyValidate(schema, doc) {
    const prog = "import json,sys,jsonschema\n" +
        "d=json.load(sys.stdin); s=d['schema']\n" +
        "cls=jsonschema.validators.validator_for(s, default=jsonschema.Draft202012Validator)\n" +
        "e=next(iter(cls(s, format_checker=jsonschema.FormatChecker()).iter_errors(d['doc'])), None)\n" +
        "print('' if e is None else e.message[:300])\n";
    const out = execFileSync("python3", ["-c", prog], { input: JSON.stringify({ schema, doc }), timeout: 30000 }).toString().trim();
    return out || null;
}

const a = parseArgs(process.argv.slice(2));
const N = Number(a.n ?? 200), SEED = Number(a.seed ?? 1), CONC = Number(a.concurrency ?? 8);
const MAX_TOKENS = Number(a["max-tokens"] ?? 256), THINK = Number(a["thinking-budget"] ?? 16);
const MODEL = a.model ?? a._[0] ?? process.env.GLINT_MODEL;

function maskbenchDir() {
    if (a.dir) return a.dir;
    if (process.env.GLINT_MASKBENCH_DIR) return process.env.GLINT_MASKBENCH_DIR;
    const env = { ...process.env };
    if (process.env.GLINT_SHARED && !env.GLINT_SHARED_DIR) env.GLINT_SHARED_DIR = process.env.GLINT_SHARED;
    const out = execFileSync("bash", ["-c", '. tests/oracle/lib.sh && . tests/oracle/grammar_lib.sh && gl_grammar_extract maskbench-dev'], { cwd: ROOT, env, encoding: "utf8" });
    return path.join(out.trim(), "maskbench");
}

async function main() {
    const dir = maskbenchDir();
    const files = fs.readdirSync(dir).filter((f) => f.endsWith(".json")).sort();
    if (!files.length) throw new Error(`no *.json schemas in ${dir}`);
    const sample = shuffled(files, SEED).slice(0, N);
    let base, key = a["api-key"] ?? null, name = a["model-name"], srv = null;
    if (a.url) base = String(a.url).replace(/\/+$/, "").replace(/\/v1$/, "");
    else {
        if (!MODEL) throw new Error("give --url URL or --model F.gguf");
        srv = await startServer({ model: MODEL, args: ["--max-num-seqs", String(CONC), "--threads", String(a.threads ?? 2), "--served-model-name", "guided200", "--deep-health-interval", "0"], env: { VLLM_API_KEY: "" } });
        base = srv.base;
    }
    const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: key ?? "none", timeout: 300000, maxRetries: 0 });
    if (!name) name = (await modelName(base, key));
    console.log(`# guided200: ${sample.length} of ${files.length} MaskBench schemas (seed ${SEED}), ${CONC} concurrent, max_tokens ${MAX_TOKENS}, thinking_token_budget ${THINK || "unset"}, server ${base}`);

    const c = { sent: 0, rejected400: 0, stop: 0, length: 0, valid: 0, invalid: 0, ajv_skipped: 0, errors: 0, other_finish: 0 };
    const rejectedBy = {}, problems = [];
    const t0 = Date.now();
    let next = 0;
    async function worker() {
        while (next < sample.length) {
            const i = next++;
            const f = sample[i];
            let schema;
            try {
                schema = JSON.parse(fs.readFileSync(path.join(dir, f), "utf8")).schema;
            } catch (e) {
                problems.push(`${f}: unreadable case file (${e.message})`);
                c.errors++;
                continue;
            }
            const body = {
                model: name, temperature: 1, seed: 1000 + i, max_tokens: MAX_TOKENS,
                messages: [{ role: "user", content: "Reply with a JSON document that follows the schema." }],
                response_format: { type: "json_schema", json_schema: { name: "s", schema, strict: true } },
            };
            if (THINK > 0) body.thinking_token_budget = THINK;
            c.sent++;
            let r;
            try {
                r = await client.chat.completions.create(body);
            } catch (e) {
                if (e?.status === 400) {
                    c.rejected400++;
                    const msg = e.error?.message ?? e.message;
                    const kw = /keyword '([^']+)'/.exec(msg)?.[1] ?? /'([^']+)'/.exec(msg)?.[1] ?? "other";
                    rejectedBy[kw] = (rejectedBy[kw] ?? 0) + 1;
                } else {
                    c.errors++;
                    problems.push(`${f}: ${e?.status ?? ""} ${short(e?.error ?? e?.message, 300)}`);
                }
                continue;
            }
            const ch = r.choices?.[0], m = ch?.message ?? {};
            for (const fld of ["content", "reasoning", "reasoning_content"]) {
                const fp = framingProblem(m[fld]);
                if (fp) {
                    c.invalid++;
                    problems.push(`${f} seed ${body.seed}: ${fld}: ${fp}`);
                }
            }
            if (ch?.finish_reason === "length") {
                c.length++;
                continue;
            }
            if (ch?.finish_reason !== "stop") {
                c.other_finish++;
                c.invalid++;
                problems.push(`${f} seed ${body.seed}: finish_reason ${short(ch?.finish_reason)} (want stop or length): ${short(m, 300)}`);
                continue;
            }
            c.stop++;
            let validate;
            try {
                validate = schemaValidator(schema);
            } catch (e) {
                // ajv cannot compile this schema: python3-jsonschema (Debian) judges it instead.
                c.ajv_skipped++;
                validate = (doc) => pyValidate(schema, doc);
            }
            let why;
            try {
                why = validate(JSON.parse(m.content ?? ""));
            } catch (e) {
                why = "not JSON: " + e.message;
            }
            if (why) {
                c.invalid++;
                problems.push(`${f} seed ${body.seed}: INVALID ${why}\n    content: ${short(m.content, 400)}`);
            } else c.valid++;
        }
    }
    await Promise.all(Array.from({ length: CONC }, worker));
    console.log(`sent ${c.sent}, 400-rejected ${c.rejected400}, stop ${c.stop}, length ${c.length}, valid ${c.valid}, invalid ${c.invalid}` + `, judged by python3-jsonschema (ajv cannot compile) ${c.ajv_skipped}, other errors ${c.errors} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
    if (c.rejected400) console.log(`400 by keyword: ${JSON.stringify(rejectedBy)}`);
    for (const p of problems.slice(0, 20)) console.log("  " + p);
    if (srv) await srv.stop();
    const ok = c.invalid === 0 && c.errors === 0;
    console.log(ok ? "guided200: OK" : "guided200: FAILED");
    process.exit(ok ? 0 : 1);
}
main().catch((e) => {
    console.log(`guided200: FAILED: ${e?.stack ?? e}`);
    process.exit(1);
});
