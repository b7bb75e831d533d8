// SPDX-License-Identifier: MIT
// Security checks of `glint serve` (docs/SECURITY.md), driven by tests/hostile/check_security.sh:
//   NODE_EXTRA_CA_CERTS=DIR/cert.pem node tests/server/security.mjs MODEL.gguf DIR
// DIR holds a self-signed certificate made at test time (cert.pem, key.pem for 127.0.0.1), a
// second unrelated key (other-key.pem) and key.pem encrypted with the passphrase in
// GL_TLS_PASSWORD (enc-key.pem). This process trusts cert.pem only through NODE_EXTRA_CA_CERTS,
// which the official openai SDK's fetch honours like any Node client would.
// Checks: TLS flag errors (one of the pair, swapped, mismatched, encrypted key without or with a
// wrong passphrase) exit with a message naming the problem; over HTTPS a chat completion and a
// streamed one through the SDK; plain HTTP to the HTTPS port gets no HTTP answer; a client that
// does not trust the certificate is refused in the handshake; `openssl s_client` verifies the
// chain over TLS 1.2 and gets no cipher over TLS 1.1; the server still serves after all that; the API key (constant-time comparison) refuses a missing, wrong, same-length, prefix and
// extended key; vLLM's cache_salt keeps prefix-cache blocks apart (hits in /metrics only between
// equal salts); a passphrase-protected key serves; and a unique marker sent in every request
// body and header (chat, completions, tokenize, a 400, a 401) never appears in the server's
// stderr, even with GLINT_LOG=debug.
import { execFile } from "node:child_process";
import fs from "node:fs";
import https from "node:https";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { OpenAI, startServer, runGlint, http, expectError, getMetrics, metricValue, tail, checkRunner, assert } from "./lib.mjs";

const [MODEL, DIR] = process.argv.slice(2);
if (!MODEL || !DIR) {
    console.error("usage: NODE_EXTRA_CA_CERTS=DIR/cert.pem node tests/server/security.mjs MODEL.gguf DIR");
    process.exit(2);
}
const CERT = path.join(DIR, "cert.pem"), KEY_PEM = path.join(DIR, "key.pem");
const OTHER_KEY = path.join(DIR, "other-key.pem"), ENC_KEY = path.join(DIR, "enc-key.pem");
const PASSWORD = process.env.GL_TLS_PASSWORD || "";
const NAME = "glimmer-sec";
const API_KEY = "sk-sec-" + Math.random().toString(36).slice(2, 12);
// Unique per run, so finding it in the log can only mean a request was logged.
const MARKER = "MARKER" + Math.random().toString(36).slice(2, 12).toUpperCase() + "XYZZY";

const { check, counts } = checkRunner(20000);
const overall = setTimeout(() => {
    console.log("FAIL security.deadline: over 60 s");
    process.exit(1);
}, 60000);
overall.unref();

// A TLS connection made without trusting cert.pem (Node's bundled Mozilla roots only, which
// NODE_EXTRA_CA_CERTS does not extend): resolves the error it ends with, or null if it succeeded.
function untrustedGet(port) {
    return new Promise((resolve) => {
        const req = https.get({ host: "127.0.0.1", port, path: "/health", ca: tls.rootCertificates, timeout: 5000 }, (res) => {
            res.resume();
            resolve(null);
        });
        req.on("timeout", () => req.destroy(new Error("timeout")));
        req.on("error", (e) => resolve(e));
    });
}

// Plain HTTP/1.1 bytes to the HTTPS port: resolves what came back before the server closed
// (null on timeout).
function plainHttp(port) {
    return new Promise((resolve) => {
        const s = net.connect(port, "127.0.0.1");
        let got = "";
        const t = setTimeout(() => {
            s.destroy();
            resolve(null);
        }, 5000);
        s.on("connect", () => s.write(`GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Marker: ${MARKER}\r\n\r\n`));
        s.on("data", (d) => (got += d.toString("latin1")));
        s.on("error", () => {});
        s.on("close", () => {
            clearTimeout(t);
            resolve(got);
        });
    });
}

async function flagError(args, want) {
    const r = await runGlint(["serve", "--model", MODEL, "--port", "0", "--deep-health-interval", "0", ...args], { timeoutMs: 15000 });
    assert(r.code !== 0 && r.code !== null, `glint serve ${args.join(" ")}: exit code ${r.code} (signal ${r.signal}), want a failure; output ${tail(r.stderr)}`);
    assert(r.stderr.includes(want), `glint serve ${args.join(" ")}: stderr lacks '${want}': ${tail(r.stderr)}`);
}

await check("tls.flag_errors", async () => {
    await flagError(["--ssl-certfile", CERT], "--ssl-certfile given without --ssl-keyfile");
    await flagError(["--ssl-keyfile", KEY_PEM], "--ssl-keyfile given without --ssl-certfile");
    await flagError(["--ssl-certfile", path.join(DIR, "missing.pem"), "--ssl-keyfile", KEY_PEM], "No such file");
    await flagError(["--ssl-certfile", KEY_PEM, "--ssl-keyfile", CERT], "no PEM CERTIFICATE");
    await flagError(["--ssl-certfile", CERT, "--ssl-keyfile", OTHER_KEY], "GnuTLS refused the certificate or key");
    await flagError(["--ssl-certfile", CERT, "--ssl-keyfile", ENC_KEY], "is encrypted: give --ssl-keyfile-password");
    await flagError(["--ssl-certfile", CERT, "--ssl-keyfile", ENC_KEY, "--ssl-keyfile-password", "wrong"], "GnuTLS refused the certificate or key");
    await flagError(["--ssl-ca-certs", CERT], "client certificates are not supported");
});

let srv = null;
await check("tls.start", async () => {
    srv = await startServer({
        model: MODEL,
        args: ["--ssl-certfile", CERT, "--ssl-keyfile", KEY_PEM, "--api-key", API_KEY, "--served-model-name", NAME, "--max-model-len", "512", "--deep-health-interval", "0", "--timeout-headers", "2"],
        env: { GLINT_LOG: "debug" },
        timeoutMs: 30000,
    });
    assert(srv.urlLine.includes(`https://127.0.0.1:${srv.port}`), `start line: ${srv.urlLine}`);
});
if (!srv) {
    console.log(`${counts.passed} passed, ${counts.failed + 1} failed`);
    process.exit(1);
}
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: API_KEY, timeout: 20000, maxRetries: 0 });

await check("tls.chat_sdk", async () => {
    const r = await client.chat.completions.create({ model: NAME, messages: [{ role: "user", content: `hello ${MARKER}` }], max_tokens: 8, temperature: 0 });
    assert(r.choices?.length === 1 && typeof r.choices[0].message?.content === "string", `response: ${tail(JSON.stringify(r))}`);
    assert(r.usage?.completion_tokens > 0, `usage: ${JSON.stringify(r.usage)}`);
});

await check("tls.chat_stream_sdk", async () => {
    const stream = await client.chat.completions.create({ model: NAME, messages: [{ role: "user", content: `stream ${MARKER}` }], max_tokens: 8, temperature: 0, stream: true });
    let n = 0, finish = null;
    for await (const c of stream) {
        n++;
        finish = c.choices?.[0]?.finish_reason ?? finish;
    }
    assert(n >= 2 && (finish === "length" || finish === "stop"), `${n} chunks, finish_reason ${finish}`);
});

await check("tls.plain_http_refused", async () => {
    const got = await plainHttp(srv.port);
    assert(got !== null, "plain HTTP to the HTTPS port: no close within 5 s");
    assert(!/^HTTP\/1\.[01] 2/.test(got), `plain HTTP to the HTTPS port was answered: ${tail(got)}`);
    let err = null;
    try {
        await fetch(`http://127.0.0.1:${srv.port}/health`, { signal: AbortSignal.timeout(5000) });
    } catch (e) {
        err = e;
    }
    assert(err && err.name !== "TimeoutError", `fetch over plain HTTP: ${err ? "timed out" : "got a response"}`);
});

await check("tls.untrusted_client_refused", async () => {
    const e = await untrustedGet(srv.port);
    assert(e, "a client without the certificate in its trust store completed the handshake");
    const codes = ["DEPTH_ZERO_SELF_SIGNED_CERT", "SELF_SIGNED_CERT_IN_CHAIN", "UNABLE_TO_VERIFY_LEAF_SIGNATURE", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY"];
    assert(codes.includes(e.code), `untrusted client failed with ${e.code ?? e.message}, want a certificate verification error`);
});

// `openssl s_client` handshake with the given flags; resolves its combined output.
function sClient(port, flags) {
    return new Promise((resolve) => {
        const p = execFile("openssl", ["s_client", "-connect", `127.0.0.1:${port}`, ...flags], { timeout: 10000 }, (err, stdout, stderr) => resolve(String(stdout) + String(stderr)));
        p.stdin.end();
    });
}

await check("tls.versions", async () => {
    // A second TLS stack as client: TLS 1.2 verifies against the test certificate; TLS 1.1 (the
    // client's security level lowered so that it would offer it) gets no cipher from glint.
    const v12 = await sClient(srv.port, ["-tls1_2", "-CAfile", CERT]);
    assert(/Protocol\s*: TLSv1\.2/.test(v12) && /Verify return code: 0 \(ok\)/.test(v12), `TLS 1.2 handshake: ${tail(v12)}`);
    const v11 = await sClient(srv.port, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]);
    assert(/Cipher is \(NONE\)/.test(v11), `TLS 1.1 was accepted: ${tail(v11)}`);
});

// The connection guard over TLS: a client that never finishes its headers is disconnected at
// --timeout-headers (2 s here) without plaintext written into its TLS stream (which the client
// would report as a record / decryption error rather than a clean end).
await check("tls.slow_headers_closed", async () => {
    const t0 = Date.now();
    const r = await new Promise((resolve) => {
        let data = "", err = null, done = false;
        const end = (e) => {
            if (done) return;
            done = true;
            resolve({ data, err: e ?? err, ms: Date.now() - t0 });
        };
        const s = tls.connect({ host: "127.0.0.1", port: srv.port, ca: fs.readFileSync(CERT) }, () => s.write("GET /health HTTP/1.1\r\nHost: x\r\n"));
        s.on("data", (d) => (data += d));
        s.on("error", (e) => (err = e));
        s.on("close", () => end());
        setTimeout(() => {
            s.destroy();
            end(new Error("not closed within 6 s"));
        }, 6000);
    });
    assert(!r.err || r.err.code === "ECONNRESET", `the TLS stream ended with ${r.err?.code ?? ""} ${r.err?.message}`);
    assert(r.ms >= 1500 && r.ms < 5000, `closed after ${r.ms} ms (--timeout-headers 2)`);
    assert(!r.data.includes("200 OK"), `a half-sent request was answered: ${tail(r.data)}`);
});

await check("tls.serves_after_failed_handshakes", async () => {
    const r = await client.completions.create({ model: NAME, prompt: `after ${MARKER}`, max_tokens: 4, temperature: 0 });
    assert(r.choices?.length === 1, `response: ${tail(JSON.stringify(r))}`);
});

// Failed handshakes are counted on /metrics and logged at most once per 10 s, not once each: 30
// plain-HTTP connections to the HTTPS port raise the counter by 30 and add at most 2 log lines.
await check("tls.handshake_failures_counted", async () => {
    const count = async () => metricValue((await getMetrics(srv.base)).series, "glint:tls_handshake_failures_total") ?? NaN;
    const lines = () => srv.log().split("\n").filter((l) => l.includes("handshake")).length;
    const [c0, l0] = [await count(), lines()];
    for (let i = 0; i < 30; i++) await plainHttp(srv.port);
    const [c1, l1] = [await count(), lines()];
    assert(c1 - c0 === 30, `glint:tls_handshake_failures_total went from ${c0} to ${c1}, want +30`);
    assert(l1 - l0 <= 2, `${l1 - l0} log lines for 30 failed handshakes: ${tail(srv.log())}`);
});

await check("auth.constant_time_key", async () => {
    const bad = [undefined, "x".repeat(API_KEY.length), API_KEY.slice(0, -1) + (API_KEY.endsWith("a") ? "b" : "a"), API_KEY.slice(0, -1), API_KEY + "x", API_KEY + API_KEY, ""];
    for (const k of bad) {
        const r = await http(srv.base, "GET", "/v1/models", { headers: k === undefined ? {} : { authorization: `Bearer ${k}` } });
        expectError(r, 401, [], `key ${JSON.stringify(k)}: `);
    }
    const lower = await http(srv.base, "GET", "/v1/models", { headers: { authorization: `bearer ${API_KEY}` } });
    assert(lower.status === 401 || lower.status === 200, `lower-case scheme: HTTP ${lower.status}`);
    const ok = await http(srv.base, "GET", "/v1/models", { key: API_KEY });
    assert(ok.status === 200, `the right key: HTTP ${ok.status} ${tail(ok.text)}`);
});

await check("logs.no_request_bodies", async () => {
    // A 400 (invalid field), a 401 carrying the marker in the key and the body, /tokenize.
    const r400 = await http(srv.base, "POST", "/v1/chat/completions", { key: API_KEY, body: { model: NAME, messages: [{ role: "user", content: MARKER }], temperature: MARKER } });
    expectError(r400, 400, [], "invalid temperature: ");
    const r401 = await http(srv.base, "POST", "/v1/completions", { key: `wrong-${MARKER}`, body: { model: NAME, prompt: MARKER } });
    expectError(r401, 401, [], "wrong key: ");
    const tok = await http(srv.base, "POST", "/tokenize", { body: { model: NAME, prompt: MARKER } });
    assert(tok.status === 200, `/tokenize: HTTP ${tok.status}`);
    const log = srv.log();
    // The log is captured (start-up lines are there), yet holds no request content.
    assert(log.includes("glint serve: serving"), `server log not captured: ${tail(log)}`);
    const at = log.indexOf(MARKER);
    assert(at < 0, `the server logged request content: ${tail(log.slice(Math.max(0, at - 200), at + 100))}`);
});

await check("prefix_cache.cache_salt", async () => {
    // ~100 prompt tokens: several full 16-token blocks. Each run's hits come from /metrics.
    const prompt = `salted ${MARKER} ` + Array.from({ length: 60 }, (_, i) => `w${i}`).join(" ");
    const hits = async () => metricValue((await getMetrics(srv.base)).series, "vllm:prefix_cache_hits_total") ?? 0;
    const run = async (salt) => {
        const h0 = await hits();
        const body = { model: NAME, prompt, max_tokens: 2, temperature: 0 };
        if (salt !== undefined) body.cache_salt = salt;
        const r = await http(srv.base, "POST", "/v1/completions", { key: API_KEY, body });
        assert(r.status === 200, `cache_salt ${JSON.stringify(salt)}: HTTP ${r.status} ${tail(r.text)}`);
        return (await hits()) - h0;
    };
    const got = [await run("tenant-a"), await run("tenant-a"), await run("tenant-b"), await run(undefined), await run(undefined), await run("tenant-b")];
    const want = [0, ">0", 0, 0, ">0", ">0"];
    const ok = got.every((g, i) => (want[i] === 0 ? g === 0 : g > 0));
    assert(ok, `prefix-cache hit tokens per run (salts a, a, b, none, none, b): ${got.join(", ")}; want ${want.join(", ")}`);
    for (const bad of ["", 7, ["x"]]) {
        const r = await http(srv.base, "POST", "/v1/completions", { key: API_KEY, body: { model: NAME, prompt: "x", max_tokens: 1, cache_salt: bad } });
        expectError(r, 400, ["cache_salt"], `cache_salt ${JSON.stringify(bad)}: `);
    }
});

await check("tls.key_password", async () => {
    const s2 = await startServer({
        model: MODEL,
        args: ["--ssl-certfile", CERT, "--ssl-keyfile", ENC_KEY, "--ssl-keyfile-password", PASSWORD, "--max-model-len", "512", "--deep-health-interval", "0"],
        timeoutMs: 30000,
    });
    try {
        const r = await http(s2.base, "GET", "/health");
        assert(r.status === 200, `/health over HTTPS with a passphrase-protected key: HTTP ${r.status}`);
    } finally {
        await s2.stop();
    }
});

await srv.stop();
console.log(`${counts.passed} passed, ${counts.failed} failed`);
process.exit(counts.failed ? 1 : 0);
