// SPDX-License-Identifier: MIT
// deploy/nginx/glint.conf in front of 3 `glint serve` replicas (tiny model, --threads 1 each) on
// loopback ports; clients are the official openai SDK (tests/oracle/package.json). Checks:
//   metrics   every metric name the endpoint picker of deploy/kubernetes/inference-pool.yaml is
//             configured to read is on glint's /metrics (vllm:cache_config_info with its labels).
//   affinity  9 conversations x 3 turns through /v1/completions (the conversation rendered by the
//             client, "User: ...\nAssistant:", each turn = the previous prompt + the answer + a
//             new user message of 24, 90, 180 words) sent with an X-Session-Id header through the
//             committed config (consistent hashing), then 9 new conversations without it through
//             a round-robin copy of the config, in the order rrOrder gives (no sampling noise: the
//             exact expectation of an assignment that ignores the conversation). Hit rate = sum
//             of delta vllm:prefix_cache_hits_total / sum of delta vllm:prefix_cache_queries_total
//             over the 3 replicas. Requires affinity >= 2 x round robin. --least-conn adds the
//             committed config's least_conn path (no header) to the report.
//   sigkill   12 streaming clients (9 with a session, 3 without); SIGKILL the replica that owns
//             the most sessions while it is generating. Requires: each request in flight on it
//             ends with an error thrown by the SDK (not a hang, bounded by the client timeout,
//             and not a clean end of stream); every other request succeeds (a finish_reason),
//             including every one started after the process is gone; each session that hashed
//             to it gets its first successful answer from another replica within 2 s of the kill.
//   sigterm   the same load on the 2 remaining replicas; SIGTERM one while it generates. Requires
//             every request to succeed (those in flight on it drain; new ones go to the other
//             replica, because the draining one closed its listening socket), those started after
//             the signal to be answered by the other replica, and the replica to exit 0.
// nginx runs as the current user from a temp dir (-p DIR -c DIR/nginx.conf, pid, logs and temp
// paths inside it); the committed glint.conf is copied with only its `listen` line changed.
//   node tests/deploy/deploy.mjs --model tiny-Q8_0.gguf [--nginx /usr/sbin/nginx] [--keep DIR]
//        [--phases affinity,sigkill,sigterm] [--least-conn] [--conf another-glint.conf]
//        [--turn-words 24,90,180] [--conversations 9] [--kv-cache-memory 64MiB]
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { OpenAI, ROOT, freePort, getMetrics, metricValue, parseArgs, rng, shuffled, sleep, startServer, tail, withTimeout } from "../server/lib.mjs";

const a = parseArgs(process.argv.slice(2));
const MODEL = a.model ?? a._[0];
const NGINX = a.nginx ?? (fs.existsSync("/usr/sbin/nginx") ? "/usr/sbin/nginx" : "nginx");
const NAME = "glint-deploy";
const REQ_TIMEOUT_MS = 15000; // per request: a hang shows as this, far below the test budget
const REROUTE_MAX_MS = 2000;
const PHASES = new Set(String(a.phases ?? "affinity,sigkill,sigterm").split(","));
const KV = String(a["kv-cache-memory"] ?? "64MiB"); // ample: the hit rates are not shaped by evictions
// Words of the user message of each turn (growing, as when a conversation goes deeper; about one
// token per word) and conversations per run.
const TURN_WORDS = String(a["turn-words"] ?? "24,90,180").split(",").map(Number);
const CONVS = Number(a.conversations ?? 9); // a multiple of 3^(turns-1) (see rrOrder)
const failures = [];
const check = (ok, what) => {
    console.log(`${ok ? "ok  " : "FAIL"} ${what}`);
    if (!ok) failures.push(what);
};

// ---------------------------------------------------------------------------------------------
// nginx from a temp dir. Two listeners: the committed config (port P) and a round-robin copy
// (port R: upstream and map names prefixed rr_, the balancing-method lines removed).
function writeNginx(dir, { port, rrPort, replicas }) {
    const committed = fs.readFileSync(path.resolve(ROOT, String(a.conf ?? "deploy/nginx/glint.conf")), "utf8");
    const listen = /^(\s*)listen 8000;$/m;
    if (!listen.test(committed)) throw new Error("deploy/nginx/glint.conf: no 'listen 8000;' line to template");
    fs.writeFileSync(path.join(dir, "glint.conf"), committed.replace(listen, `$1listen 127.0.0.1:${port};`));
    let rr = committed.replace(listen, `$1listen 127.0.0.1:${rrPort};`).replace(/\bglint_/g, "rr_");
    rr = rr.replace(/^\s*(least_conn|hash\s[^;]*);\s*$/gm, "");
    if (/least_conn;|hash \$/.test(rr)) throw new Error("round-robin copy still has a balancing method");
    fs.writeFileSync(path.join(dir, "rr.conf"), rr);
    fs.writeFileSync(path.join(dir, "glint-replicas.conf"), replicas.map((r) => `server 127.0.0.1:${r.port} max_fails=1 fail_timeout=5s;\n`).join(""));
    const user = process.getuid?.() === 0 ? "user root;\n" : ""; // workers may write temp files in DIR
    fs.writeFileSync(
        path.join(dir, "nginx.conf"),
        `${user}daemon off;
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
events { worker_connections 512; }
http {
    access_log ${dir}/access.log;
    client_body_temp_path ${dir}/tmp_client;
    proxy_temp_path ${dir}/tmp_proxy;
    fastcgi_temp_path ${dir}/tmp_fastcgi;
    uwsgi_temp_path ${dir}/tmp_uwsgi;
    scgi_temp_path ${dir}/tmp_scgi;
    include glint.conf;
    include rr.conf;
}
`,
    );
}

async function startNginx(dir, ports) {
    const t = await new Promise((resolve) => {
        const p = spawn(NGINX, ["-t", "-p", dir + "/", "-c", path.join(dir, "nginx.conf"), "-e", path.join(dir, "error.log")], { stdio: ["ignore", "pipe", "pipe"] });
        let out = "";
        p.stdout.on("data", (d) => (out += d));
        p.stderr.on("data", (d) => (out += d));
        p.on("close", (code) => resolve({ code, out }));
        p.on("error", (e) => resolve({ code: -1, out: String(e) }));
    });
    check(t.code === 0, `nginx -t accepts deploy/nginx/glint.conf (templated)${t.code === 0 ? "" : ": " + tail(t.out)}`);
    if (t.code !== 0) throw new Error("nginx config rejected");
    const proc = spawn(NGINX, ["-p", dir + "/", "-c", path.join(dir, "nginx.conf"), "-e", path.join(dir, "error.log")], { stdio: ["ignore", "pipe", "pipe"] });
    let log = "";
    proc.stdout.on("data", (d) => (log += d));
    proc.stderr.on("data", (d) => (log += d));
    const exited = new Promise((resolve) => proc.on("close", (code, signal) => resolve({ code, signal })));
    process.on("exit", () => {
        if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
    });
    const t0 = Date.now();
    for (;;) {
        let ok = 0;
        for (const p of ports) {
            try {
                const r = await fetch(`http://127.0.0.1:${p}/health`, { signal: AbortSignal.timeout(2000) });
                await r.arrayBuffer();
                if (r.status === 200) ok++;
            } catch {}
        }
        if (ok === ports.length) break;
        if (proc.exitCode !== null || Date.now() - t0 > 10000) throw new Error(`nginx did not answer /health on ${ports} within 10 s: ${tail(log)} ${tail(fs.readFileSync(path.join(dir, "error.log"), "utf8"))}`);
        await sleep(50);
    }
    return {
        proc,
        async stop() {
            if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGQUIT"); // graceful
            await withTimeout(exited, 5000, "nginx exit").catch(() => proc.kill("SIGKILL"));
        },
    };
}

// ---------------------------------------------------------------------------------------------
// One streamed request through the SDK: chat (messages) or completions (prompt). Resolves a
// record; never throws.
async function chat(client, { messages, prompt, session, maxTokens, seed }) {
    const rec = { session, start: Date.now(), headersAt: null, end: null, ok: false, thrown: null, upstream: [], content: "", finish: null };
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error(`client timeout ${REQ_TIMEOUT_MS} ms`)), REQ_TIMEOUT_MS);
    try {
        const headers = session ? { "X-Session-Id": session } : {};
        const body = { model: NAME, max_tokens: maxTokens, temperature: 0, seed, stream: true };
        const api = prompt !== undefined ? client.completions : client.chat.completions;
        const { data: stream, response } = await api.create(prompt !== undefined ? { ...body, prompt } : { ...body, messages }, { headers, signal: ac.signal }).withResponse();
        rec.headersAt = Date.now();
        rec.upstream = (response.headers.get("x-glint-upstream") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
        for await (const c of stream) {
            const ch = c.choices?.[0];
            if (typeof ch?.delta?.content === "string") rec.content += ch.delta.content;
            if (typeof ch?.text === "string") rec.content += ch.text;
            if (ch?.finish_reason) rec.finish = ch.finish_reason;
        }
        rec.ok = rec.finish !== null; // false with thrown null: a clean end without a finish_reason
    } catch (e) {
        rec.thrown = `${e?.constructor?.name}: ${e?.message ?? e}${e?.cause?.code ? " (" + e.cause.code + ")" : ""}`;
        if (e?.headers?.get) rec.upstream = (e.headers.get("x-glint-upstream") ?? "").split(",").map((s) => s.trim()).filter(Boolean);
    } finally {
        clearTimeout(timer);
        rec.end = Date.now();
    }
    rec.last = rec.upstream[rec.upstream.length - 1] ?? null;
    return rec;
}

// ---------------------------------------------------------------------------------------------
const WORDS = (
    "river stone lamp orchard violin harbor meadow copper lantern window garden thunder marble " +
    "pepper candle forest silver anchor canyon velvet ribbon castle feather glacier island jungle " +
    "kettle ladder magnet needle oyster pillow quartz saddle tunnel umbrella vessel walnut yacht " +
    "zephyr almond bishop cactus dragon engine falcon gravel hammer igloo jacket kernel lizard " +
    "mirror nectar olive parrot quiver rocket sandal tablet uncle valley wagon xenon yogurt zebra"
).split(" ");
function text(r, n) {
    const w = [];
    for (let i = 0; i < n; i++) w.push(WORDS[Math.floor(r() * WORDS.length)]);
    return w.join(" ");
}

async function metricsSum(replicas) {
    let hits = 0, queries = 0;
    for (const s of replicas) {
        const { series } = await getMetrics(s.base);
        hits += metricValue(series, "vllm:prefix_cache_hits_total") ?? NaN;
        queries += metricValue(series, "vllm:prefix_cache_queries_total") ?? NaN;
    }
    return { hits, queries };
}

// The round-robin baseline without sampling noise. nginx's round robin sends the i-th request to
// replica (i + offset) mod 3; sent one at a time, a round of C requests (C a multiple of 3) in the
// order below gives conversation c the replica r_c(t) + offset in round t, where
// r_c(t) = r_c(0) + d_1 + ... + d_t (mod 3) and the steps d (0: the previous turn's replica, 1 or 2:
// another one) run through every combination in {0,1,2}^(T-1) equally often over the
// conversations: exactly the expectation of an assignment that ignores the conversation (each
// turn on the previous turn's replica with probability 1/3, ...). r_c(0) = the last step's digit
// keeps every round balanced (C/3 conversations per replica). Returns, per round, the conversation
// indices in sending order.
function rrOrder(conversations, turns) {
    const m = 3 ** (turns - 1);
    if (conversations % m) throw new Error(`--conversations must be a multiple of ${m} for ${turns} turns`);
    const rel = (c, t) => {
        const k = c % m;
        let r = Math.floor(k / 3 ** Math.max(0, turns - 2)) % 3; // r_c(0)
        for (let j = 1; j <= t; j++) r += Math.floor(k / 3 ** (j - 1)) % 3;
        return r % 3;
    };
    return Array.from({ length: turns }, (_, t) => {
        const by = [[], [], []];
        for (let c = 0; c < conversations; c++) by[rel(c, t)].push(c);
        if (by.some((b) => b.length !== conversations / 3)) throw new Error("rrOrder: unbalanced round");
        return by[0].flatMap((c, i) => [c, by[1][i], by[2][i]]);
    });
}

// N conversations x T turns, in T rounds (a barrier between rounds): round t sends turn t of every
// conversation in a seeded shuffled order through W workers. More conversations than requests in
// flight is the case where affinity matters most: each replica's KV pool then has to keep the
// prefixes of its 1/3 of the conversations under affinity, but of all of them under round robin.
// order: "shuffled" (seeded, W workers) or "rr" (rrOrder, one request at a time).
async function multiTurn(client, replicas, { seed, withSession, conversations = CONVS, turns = TURN_WORDS.length, workers = 6, order = "shuffled" }) {
    const rounds = order === "rr" ? rrOrder(conversations, turns) : null;
    if (rounds) workers = 1;
    const before = await metricsSum(replicas);
    const recs = [];
    const convs = Array.from({ length: conversations }, (_, ci) => {
        const r = rng(seed * 1000 + ci);
        return { ci, r, alive: true, prompt: `User: conversation ${seed}-${ci}. ${text(r, TURN_WORDS[0])}\nAssistant:` };
    });
    for (let t = 0; t < turns; t++) {
        const queue = rounds ? rounds[t].map((i) => convs[i]).filter((c) => c.alive) : shuffled(convs.filter((c) => c.alive), seed * 100 + t);
        await Promise.all(
            Array.from({ length: workers }, async () => {
                for (let c; (c = queue.shift()); ) {
                    const rec = await chat(client, { prompt: c.prompt, session: withSession ? `conv-${seed}-${c.ci}` : null, maxTokens: 2, seed: c.ci });
                    rec.conv = c.ci;
                    rec.turn = t;
                    recs.push(rec);
                    if (!rec.ok) {
                        c.alive = false;
                        continue;
                    }
                    if (t + 1 < turns) c.prompt += `${rec.content}\nUser: ${text(c.r, TURN_WORDS[t + 1])}\nAssistant:`;
                }
            }),
        );
    }
    const after = await metricsSum(replicas);
    const dq = after.queries - before.queries, dh = after.hits - before.hits;
    const bad = recs.filter((x) => !x.ok);
    // Turns (after the first) answered by the replica of the previous turn / of any earlier turn.
    const byConv = new Map();
    for (const x of recs) (byConv.get(x.conv) ?? byConv.set(x.conv, []).get(x.conv))[x.turn] = x.last;
    let later = 0, samePrev = 0, sameAny = 0;
    for (const seq of byConv.values())
        for (let t = 1; t < seq.length; t++) {
            later++;
            if (seq[t] === seq[t - 1]) samePrev++;
            if (seq.slice(0, t).includes(seq[t])) sameAny++;
        }
    return { rate: dq > 0 ? dh / dq : NaN, dh, dq, n: recs.length, bad, later, samePrev, sameAny };
}

// Closed-loop streaming load: clients[i] = {session|null}; runs until stop() is called.
function load(client, clientsSpec, { seed }) {
    const recs = [], inflight = new Set();
    let stopping = false;
    const loops = clientsSpec.map(async (spec, ci) => {
        const r = rng(seed * 7919 + ci);
        for (let k = 0; !stopping && k < 1000; k++) {
            const marker = { session: spec.session, start: Date.now(), ci };
            inflight.add(marker);
            const rec = await chat(client, { messages: [{ role: "user", content: `client ${ci} request ${k}: ${text(r, 20)}` }], session: spec.session, maxTokens: 16 + Math.floor(r() * 17), seed: ci });
            inflight.delete(marker);
            rec.ci = ci;
            recs.push(rec);
        }
    });
    return {
        recs,
        inflight,
        async stop() {
            stopping = true;
            await Promise.all(loops);
        },
    };
}

// Waits (bounded) until replica SRV is generating (vllm:num_requests_running > 0), so that the
// signal sent next finds requests in flight on it.
async function waitRunning(srv, timeoutMs) {
    const t0 = Date.now();
    while (Date.now() - t0 < timeoutMs) {
        try {
            const { series } = await getMetrics(srv.base);
            if ((metricValue(series, "vllm:num_requests_running") ?? 0) > 0) return true;
        } catch {}
        await sleep(20);
    }
    return false;
}

async function main() {
    if (!MODEL) throw new Error("usage: node tests/deploy/deploy.mjs --model F.gguf");
    const t0 = Date.now();
    const dir = a.keep ? path.resolve(String(a.keep)) : fs.mkdtempSync(path.join(os.tmpdir(), "glint-deploy-"));
    fs.mkdirSync(dir, { recursive: true });
    const args = ["--threads", "1", "--served-model-name", NAME, "--deep-health-interval", "0", "--shutdown-timeout", "20", "--kv-cache-memory", KV];
    const replicas = await Promise.all([0, 1, 2].map(() => startServer({ model: MODEL, args, env: { VLLM_API_KEY: "" } })));
    const addr = (s) => `127.0.0.1:${s.port}`;
    const port = await freePort(), rrPort = await freePort();
    writeNginx(dir, { port, rrPort, replicas });
    const nginx = await startNginx(dir, [port, rrPort]);
    console.log(`# replicas ${replicas.map(addr).join(" ")}; nginx :${port} (committed config), :${rrPort} (round robin); dir ${dir}; ready in ${Date.now() - t0} ms`);
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0, timeout: REQ_TIMEOUT_MS });
    const rrClient = new OpenAI({ baseURL: `http://127.0.0.1:${rrPort}/v1`, apiKey: "none", maxRetries: 0, timeout: REQ_TIMEOUT_MS });
    try {
        // ---- the metrics the endpoint picker is configured to read (deploy/kubernetes) ------------
        {
            const y = fs.readFileSync(path.join(ROOT, "deploy/kubernetes/inference-pool.yaml"), "utf8");
            const names = [...y.matchAll(/- --[a-z-]+-metric\n\s*- "?([^"\n]*)"?/g)].map((m) => m[1]).filter(Boolean);
            const { series } = await getMetrics(replicas[0].base);
            const missing = names.filter((n) => !series.some((x) => x.name === n));
            const info = series.find((x) => x.name === "vllm:cache_config_info");
            check(names.length >= 4 && missing.length === 0, `glint's /metrics has every metric the EPP reads (${names.join(", ")})${missing.length ? `; missing: ${missing.join(", ")}` : ""}`);
            check(info?.value === 1 && Number(info.labels.block_size) > 0 && Number(info.labels.num_gpu_blocks) > 0, `vllm:cache_config_info{block_size=${info?.labels.block_size},num_gpu_blocks=${info?.labels.num_gpu_blocks}} = ${info?.value}`);
        }
        // ---- affinity -------------------------------------------------------------------------
        if (PHASES.has("affinity")) {
        let tp = Date.now();
        const aff = await multiTurn(client, replicas, { seed: 1, withSession: true });
        console.log(`# affinity run ${Date.now() - tp} ms`);
        const rr = await multiTurn(rrClient, replicas, { seed: 2, withSession: false, order: "rr" });
        const lc = a["least-conn"] ? await multiTurn(client, replicas, { seed: 3, withSession: false }) : null;
        const pct = (x) => `${(100 * x.rate).toFixed(1)}% (${x.dh}/${x.dq} tokens, ${x.n} requests; later turns on the previous turn's replica ${x.samePrev}/${x.later}, on an earlier turn's ${x.sameAny}/${x.later})`;
        console.log(`# prefix-cache hit rate: affinity ${pct(aff)}; round robin ${pct(rr)}${lc ? `; least_conn without session ${pct(lc)}` : ""}`);
        check(aff.bad.length === 0 && rr.bad.length === 0, `multi-turn requests all succeed (${[...aff.bad, ...rr.bad].map((x) => x.thrown).slice(0, 3).join("; ")})`);
        check(aff.samePrev === aff.later && aff.later > 0, `each session's turns were answered by one replica (${aff.samePrev}/${aff.later})`);
        check(rr.later > 0 && rr.samePrev * 3 === rr.later, `round-robin baseline as designed: 1/3 of the later turns on the previous turn's replica (${rr.samePrev}/${rr.later})`);
        check(aff.rate >= 2 * rr.rate, `affinity hit rate ${(100 * aff.rate).toFixed(1)}% >= 2 x round-robin ${(100 * rr.rate).toFixed(1)}% (ratio ${(aff.rate / rr.rate).toFixed(2)}; ${Date.now() - tp} ms)`);
        }

        // ---- SIGKILL under load ---------------------------------------------------------------
        const spec = [...Array.from({ length: 9 }, (_, i) => ({ session: `kill-s${i}` })), ...Array.from({ length: 3 }, () => ({ session: null }))];
        // Until every client has finished a request started at or after time T (bounded).
        const settle = async (L, T) => {
            const t = Date.now();
            while (Date.now() - t < 10000 && new Set(L.recs.filter((x) => x.start >= T).map((x) => x.ci)).size < spec.length) await sleep(50);
        };
        // session -> the replica that answers it now (one 1-token request per session).
        const owners = async () => {
            const recs = await Promise.all(spec.filter((x) => x.session).map((x) => chat(client, { prompt: "owner probe", session: x.session, maxTokens: 1, seed: 0 })));
            const bad = recs.filter((x) => !x.ok);
            if (bad.length) throw new Error(`owner probe failed: ${bad[0].thrown}`);
            return new Map(recs.map((x) => [x.session, x.last]));
        };
        if (PHASES.has("sigkill")) {
        const tp = Date.now();
        const owner = await owners();
        const L = load(client, spec, { seed: 4 });
        const count = new Map(replicas.map((s) => [addr(s), 0]));
        for (const v of owner.values()) count.set(v, (count.get(v) ?? 0) + 1);
        const victim = replicas.reduce((b, s) => (count.get(addr(s)) > count.get(addr(b)) ? s : b));
        const vAddr = addr(victim);
        const victimSessions = [...owner].filter(([, v]) => v === vAddr).map(([s]) => s);
        await waitRunning(victim, 5000);
        let tDead = null; // the process is gone (its listening socket closed with it)
        victim.proc.once("exit", () => (tDead = Date.now()));
        const tKill = Date.now();
        victim.proc.kill("SIGKILL");
        await withTimeout(victim.exited, 5000, "killed replica exit");
        tDead ??= Date.now();
        await settle(L, tDead);
        await L.stop();
        // In flight on the victim: answered (or cut) by it and still open at the kill. Between
        // the signal and the process's end (a few ms) the kernel still completes connections to
        // it; a request sent on one reached the replica and is, rightly, not replayed by nginx.
        // (One that completed just before the kill can end on the client's clock after it: such
        // an answer is complete and counts as such; the rest were cut by the kill.)
        const onVictim = L.recs.filter((x) => x.last === vAddr && x.end >= tKill);
        const cut = onVictim.filter((x) => !x.ok);
        const others = L.recs.filter((x) => !onVictim.includes(x));
        const after = L.recs.filter((x) => x.start >= tDead);
        const reroute = victimSessions.map((s) => {
            const first = L.recs.filter((x) => x.session === s && x.start >= tKill && x.ok).sort((p, q) => p.headersAt - q.headersAt)[0];
            return first ? { s, ms: first.headersAt - tKill, via: first.upstream.join(">") } : { s, ms: Infinity };
        });
        const worst = Math.max(...reroute.map((r) => r.ms));
        const lat = cut.map((x) => x.end - tKill);
        console.log(
            `# sigkill ${vAddr} (owner of ${victimSessions.length}/9 sessions; exited ${tDead - tKill} ms after the signal): ${L.recs.length} requests, ${cut.length} in flight on it cut (${cut.filter((x) => x.start >= tKill).length} sent after the signal; ${onVictim.length - cut.length} completed) ` +
                `(errors after ${lat.length ? Math.min(...lat) + ".." + Math.max(...lat) : "-"} ms: ${[...new Set(cut.map((x) => x.thrown))].slice(0, 2).join(" | ")}), ` +
                `${after.length} started after the kill; reroute of its sessions ${reroute.map((r) => r.ms).join(",")} ms; phase ${Date.now() - tp} ms`,
        );
        check(cut.length >= 1, `some requests in flight on the killed replica were cut (${cut.length})`);
        check(cut.every((x) => x.thrown && !/client timeout/.test(x.thrown)), `each request cut by the kill got an error from the SDK, not a hang or a clean end without finish_reason (${cut.filter((x) => !x.thrown || /client timeout/.test(x.thrown)).length} did not)`);
        check(others.every((x) => x.ok), `every other request succeeded (${others.filter((x) => !x.ok).length} of ${others.length} failed: ${others.filter((x) => !x.ok).map((x) => `${x.thrown} via ${x.upstream}`).slice(0, 3).join("; ")})`);
        check(after.length >= spec.length && after.every((x) => x.ok && x.last !== vAddr), `all ${after.length} requests started after the killed replica's exit succeeded on another replica (${after.filter((x) => !x.ok).map((x) => `${x.thrown} via ${x.upstream}`).slice(0, 3).join("; ")})`);
        check(victimSessions.length >= 1 && worst <= REROUTE_MAX_MS, `sessions of the killed replica answered elsewhere within ${REROUTE_MAX_MS} ms (worst ${worst} ms)`);

        }
        // ---- SIGTERM under load ---------------------------------------------------------------
        if (PHASES.has("sigterm")) {
        const tp = Date.now();
        const alive = replicas.filter((s) => s.proc.exitCode === null && s.proc.signalCode === null);
        const owner2 = await owners();
        const L2 = load(client, spec, { seed: 5 });
        const cnt2 = new Map(alive.map((s) => [addr(s), 0]));
        for (const v of owner2.values()) cnt2.set(v, (cnt2.get(v) ?? 0) + 1);
        const term = alive.reduce((b, s) => (cnt2.get(addr(s)) > cnt2.get(addr(b)) ? s : b));
        const tAddr = addr(term);
        await waitRunning(term, 5000);
        const tTerm = Date.now();
        term.proc.kill("SIGTERM");
        const exit = await withTimeout(term.exited, 25000, "drained replica exit").catch((e) => ({ code: `none (${e.message})` }));
        const tExit = Date.now();
        await settle(L2, tTerm);
        await L2.stop();
        const drained = L2.recs.filter((x) => x.start < tTerm && x.last === tAddr && x.end >= tTerm);
        const after2 = L2.recs.filter((x) => x.start >= tTerm);
        const failed2 = L2.recs.filter((x) => !x.ok);
        console.log(
            `# sigterm ${tAddr}: exited ${exit.code ?? exit.signal} after ${tExit - tTerm} ms; ${L2.recs.length} requests, ${drained.length} drained on it, ` +
                `${after2.length} started after SIGTERM (${after2.filter((x) => x.upstream.includes(tAddr)).length} first tried it), ${failed2.length} failed; phase ${Date.now() - tp} ms`,
        );
        check(exit.code === 0, `SIGTERM'd replica exited 0 after draining (${exit.code ?? exit.signal})`);
        check(drained.length >= 1, `some requests were in flight on the SIGTERM'd replica (${drained.length})`);
        check(failed2.length === 0, `no request lost on SIGTERM (${failed2.length} of ${L2.recs.length} failed: ${failed2.map((x) => `${x.thrown} via ${x.upstream}`).slice(0, 3).join("; ")})`);
        check(after2.length >= spec.length && after2.every((x) => x.last !== tAddr), `the ${after2.length} requests started after SIGTERM were answered by another replica`);
        }
    } finally {
        await nginx.stop();
        await Promise.all(replicas.map((s) => s.stop()));
        if (!a.keep && failures.length === 0) fs.rmSync(dir, { recursive: true, force: true });
        else console.log(`# nginx logs kept in ${dir}`);
    }
    console.log(`deploy: ${failures.length ? `FAILED (${failures.length})` : "OK"} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    process.exit(failures.length ? 1 : 0);
}

main().catch((e) => {
    console.error(`FAIL deploy: ${e?.stack ?? e}`);
    process.exit(1);
});
