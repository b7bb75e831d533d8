// SPDX-License-Identifier: MIT
// Inter-token latency of text streams while images encode (issue 21 part 3, docs/SERVER.md
// "Vision encoding"). One `glint serve` on loopback, the tiny HF folder with its vision tower
// (a 1568x1568 image is 3136 merged tokens, 12544 patches: the tower's full-attention layer makes
// one encode take seconds on 2 cores). Rounds, interleaved A B A B:
//   A: 4 streaming text completions alone;
//   B: the same 4 streams started together with 4 chat requests, each a different 1568x1568
//      image (max_tokens 1), so 4 encodes run while the streams decode.
// ITL = the gap between consecutive content chunks of one stream; reported: p50 / p99 over all
// gaps of a round's 4 streams, and for B also only the gaps that ended before the last image
// reply (the time the encoder was busy). Usage: node bench/encoder_itl.mjs MODEL_DIR [ROUNDS]
// (GLINT_BIN picks the binary; ITL_TOKENS the stream length, default 200).
import { startServer, streamPost, http, png } from "../tests/server/lib.mjs";

const dir = process.argv[2];
const rounds = Number(process.argv[3] || 2);
const nTok = Number(process.env.ITL_TOKENS || 200);
const side = Number(process.env.ITL_IMAGE_SIDE || 1568);

// A distinct picture per seed (the encoder cache must not serve it).
const picture = (w, h, seed) => png(w, h, (x, y) => [(x + seed * 17) & 255, (y * 3) & 255, (x ^ y ^ seed) & 255]);

let retries = 0;
const pct = (a, q) => {
    if (!a.length) return NaN;
    const s = [...a].sort((x, y) => x - y);
    return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function textStream(base, i) {
    const times = [];
    const r = await streamPost(base, "/v1/completions", { prompt: `Stream ${i}: once upon a time`, max_tokens: nTok, ignore_eos: true, temperature: 0, stream: true }, {
        timeoutMs: 600000,
        onChunk: () => {
            times.push(performance.now());
        },
    });
    if (r.status !== 200) throw new Error(`text ${r.status} ${r.text}`);
    return times;
}

async function imageReq(base, k, round) {
    const url = "data:image/png;base64," + picture(side, side, k + 8 * round).toString("base64");
    const t0 = performance.now();
    let r;
    for (let attempt = 0; ; attempt++) {
        // A large body on a loaded machine sometimes meets EPIPE (both binaries): retry, counted.
        try {
            r = await http(base, "POST", "/v1/chat/completions", {
                body: { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }, { type: "text", text: "What is it?" }] }], max_tokens: 1, temperature: 0 },
                timeoutMs: 600000,
            });
            break;
        } catch (e) {
            if (attempt >= 3) throw e;
            retries++;
        }
    }
    if (r.status !== 200) throw new Error(`image ${r.status} ${JSON.stringify(r.body ?? r.text).slice(0, 300)}`);
    return performance.now() - t0;
}

const srv = await startServer({ model: dir, args: ["--max-media-bytes", "64MiB", "--mm-processor-cache-gb", "0"], timeoutMs: 120000 });
try {
    for (let round = 0; round < rounds; round++)
        for (const withImages of [false, true]) {
            const t0 = performance.now();
            const imgs = withImages ? [0, 1, 2, 3].map((k) => imageReq(srv.base, k, round)) : [];
            const streams = await Promise.all([0, 1, 2, 3].map((i) => textStream(srv.base, i)));
            const imgMs = await Promise.all(imgs);
            const tImgEnd = t0 + Math.max(0, ...imgMs);
            const all = [], during = [];
            for (const t of streams)
                for (let j = 1; j < t.length; j++) {
                    all.push(t[j] - t[j - 1]);
                    if (t[j] <= tImgEnd) during.push(t[j] - t[j - 1]);
                }
            const wall = (performance.now() - t0) / 1000;
            console.log(
                `round ${round} ${withImages ? "B text+4 images" : "A text alone    "}: ITL p50 ${pct(all, 0.5).toFixed(1)} ms p99 ${pct(all, 0.99).toFixed(1)} ms (${all.length} gaps)` +
                    (withImages ? `; during encoding p50 ${pct(during, 0.5).toFixed(1)} p99 ${pct(during, 0.99).toFixed(1)} ms (${during.length} gaps); image replies ${imgMs.map((x) => (x / 1000).toFixed(1)).join(" ")} s` : "") +
                    `; wall ${wall.toFixed(1)} s`,
            );
        }
    const m = await http(srv.base, "GET", "/metrics");
    const lines = String(m.text ?? m.body ?? "").split("\n").filter((l) => /^glint:(encoder|mm_cache)/.test(l));
    console.log(lines.join("\n") + `\nimage request retries after a transport error: ${retries}`);
} finally {
    await srv.stop();
}
