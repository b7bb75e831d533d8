// SPDX-License-Identifier: MIT
// Images through `glint serve` (issue 12) on the tiny random HF checkpoint with its vision tower
// (`glint make-model --format safetensors`), with the official openai SDK as the client:
//  - an image chat request under a JSON schema ends with "stop" and the reply validates (ajv);
//  - the prefix cache, read from /metrics: the same image twice hits past the image, a different
//    image of the same size misses from the image on (so two images never share KV);
//  - the encoder cache (/metrics glint:mm_cache_*): a known image is a hit, a new one a miss;
//  - mm_processor_kwargs.max_image_tokens changes the prompt's token count as the grid says;
//  - a local file under --allowed-local-media-path works;
//  - a video (a 3 s testsrc2 clip: 6 frames at 2 fps, 3 temporal groups) under a JSON schema
//    validates; the same clip twice hits the prefix cache past the video, while the same clip
//    sampled at other frames (num_frames 4: its first group's second frame differs) misses from
//    that group on; a broken clip and bad mm_processor_kwargs are 400s that name the field;
//  - remote parts (--allowed-media-domains 127.0.0.1, a loopback HTTP server of the test's own):
//    an http URL answers like the same bytes inline; another host, a 404, a redirect, a body over
//    --max-media-bytes and a stalled reply (--media-fetch-timeout 1) are 400s that say which.
// usage: node tests/server/vision.mjs HF_DIR
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import httpServer from "node:http";
import { OpenAI, startServer, getMetrics, metricValue, schemaValidator, http, expectError, short, png } from "./lib.mjs";

const dir = process.argv[2];
if (!dir) throw new Error("usage: vision.mjs HF_DIR");

const dataUrl = (b) => "data:image/png;base64," + b.toString("base64");

let failed = 0;
async function check(name, fn) {
    try {
        await fn();
        console.log(`PASS ${name}`);
    } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${e.message}`);
    }
}
const assert = (c, m) => {
    if (!c) throw new Error(m);
};

const media = fs.mkdtempSync(path.join(os.tmpdir(), "glint-vision-"));
const imgA = png(56, 56, (x, y) => [(x * 4) & 255, (y * 4) & 255, 128]);
const imgB = png(56, 56, (x, y) => [255 - ((x * 4) & 255), 40, (y * 4) & 255]);
const imgBig = png(112, 112, (x, y) => [x & 255, y & 255, (x + y) & 255]);
fs.writeFileSync(path.join(media, "a.png"), imgA);
// The remote media host: loopback only, every reply bounded (the stalled one is closed at exit).
const stalled = [];
const host = httpServer.createServer((req, res) => {
    if (req.url === "/a.png") return res.end(imgA);
    if (req.url === "/redirect") { res.writeHead(302, { location: "/a.png" }); return res.end(); }
    if (req.url === "/big") { res.writeHead(200); for (let i = 0; i < 40; i++) res.write(Buffer.alloc(65536, 7)); return res.end(); }
    if (req.url === "/slow") { stalled.push(res); return; }
    res.writeHead(404);
    res.end("no");
});
await new Promise((ok) => host.listen(0, "127.0.0.1", ok));
const hostUrl = `http://127.0.0.1:${host.address().port}`;
const srv = await startServer({ model: dir, args: ["--served-model-name", "v", "--max-model-len", "4096", "--allowed-local-media-path", media, "--deep-health-interval", "0", "--allowed-media-domains", "127.0.0.1", "--media-fetch-timeout", "1", "--max-media-bytes", "1MiB"] });
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "none", timeout: 60000, maxRetries: 0 });
const hits = async () => metricValue((await getMetrics(srv.base)).series, "vllm:prefix_cache_hits_total");
// The image comes before a long text, so full 16-token KV blocks follow it: they may be reused
// only by a request with the same image.
const TEXT = "Which animal is in the picture? Look at the fur, the ears and the eyes before you answer. ".repeat(3);
const ask = (url, extra = {}) =>
    client.chat.completions.create({
        model: "v", max_tokens: 48, temperature: 0,
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }, { type: "text", text: TEXT }] }],
        ...extra,
    });
try {
    await check("vision.json_schema_valid", async () => {
        const schema = { type: "object", properties: { kind: { enum: ["cat", "dog", "car"] }, n: { type: "integer", minimum: 0, maximum: 9 } }, required: ["kind", "n"], additionalProperties: false };
        const r = await ask(dataUrl(imgA), { response_format: { type: "json_schema", json_schema: { name: "pic", schema } } });
        const c = r.choices[0];
        assert(c.finish_reason === "stop", `finish_reason ${c.finish_reason}: ${short(c.message.content)}`);
        const problem = schemaValidator(schema)(JSON.parse(c.message.content));
        assert(!problem, `invalid: ${short(c.message.content)}: ${problem}`);
        // 56x56 px = a 2x2 grid of merged tokens: the image takes 4 soft tokens + 2 brackets.
        assert(r.usage.prompt_tokens > 6, `prompt_tokens ${r.usage.prompt_tokens}`);
    });
    await check("vision.prefix_cache_same_hits_different_misses", async () => {
        const h0 = await hits();
        const r1 = await ask(dataUrl(imgA)); // warm: the same image as above
        const h1 = await hits();
        await ask(dataUrl(imgB)); // same size and tokens, other pixels
        const h2 = await hits();
        const n = r1.usage.prompt_tokens;
        console.log(`  prompt ${n} tokens; hits: same image +${h1 - h0}, different image +${h2 - h1}`);
        // The same image: every full block but the last is reused; another image: only the blocks
        // before the one holding its first soft token (the system header, < 48 tokens).
        assert(h1 - h0 >= 16 * Math.floor((n - 1) / 16) - 16, `same image: +${h1 - h0} hits of ${n}`);
        assert(h2 - h1 <= 48 && h2 - h1 < h1 - h0 - 32, `a different image reused too much (+${h2 - h1} vs +${h1 - h0})`);
    });
    await check("vision.encoder_cache", async () => {
        const mm = async () => {
            const m = (await getMetrics(srv.base)).series;
            return [metricValue(m, "glint:mm_cache_queries_total"), metricValue(m, "glint:mm_cache_hits_total")];
        };
        const [q0, h0] = await mm();
        await ask(dataUrl(imgA), { max_tokens: 1 }); // encoded by the checks above
        const [q1, h1] = await mm();
        const imgC = png(56, 56, (x, y) => [(x * 7) & 255, (y * 3) & 255, 9]);
        await ask(dataUrl(imgC), { max_tokens: 1 }); // never seen
        const [q2, h2] = await mm();
        assert(q1 - q0 === 1 && h1 - h0 === 1, `a known image: +${q1 - q0} lookups, +${h1 - h0} hits`);
        assert(q2 - q1 === 1 && h2 - h1 === 0, `a new image: +${q2 - q1} lookups, +${h2 - h1} hits`);
    });
    await check("vision.max_image_tokens", async () => {
        const big = await ask(dataUrl(imgBig), { max_tokens: 1 }); // 112 px: 4x4 = 16 tokens
        const capped = await ask(dataUrl(imgBig), { max_tokens: 1, mm_processor_kwargs: { max_image_tokens: 4 } });
        const d = big.usage.prompt_tokens - capped.usage.prompt_tokens;
        assert(d === 12, `16 vs 4 image tokens should differ by 12 prompt tokens, got ${d}`);
    });
    await check("vision.local_file", async () => {
        const viaFile = await ask("file://" + path.join(media, "a.png"), { max_tokens: 4 });
        const viaData = await ask(dataUrl(imgA), { max_tokens: 4 });
        assert(viaFile.choices[0].message.content === viaData.choices[0].message.content, "a local file and the same bytes inline answer differently");
    });
    const clip = fs.readFileSync(new URL("../fuzz/corpus/video/testsrc2_96x64_25fps_3s.mp4", import.meta.url));
    const clipUrl = "data:video/mp4;base64," + clip.toString("base64");
    const askVideo = (extra = {}) =>
        client.chat.completions.create({
            model: "v", max_tokens: 48, temperature: 0,
            messages: [{ role: "user", content: [{ type: "video_url", video_url: { url: clipUrl } }, { type: "text", text: TEXT }] }],
            ...extra,
        });
    await check("video.json_schema_valid", async () => {
        const schema = { type: "object", properties: { moving: { type: "boolean" }, objects: { type: "array", items: { enum: ["ball", "box", "text"] }, maxItems: 3 } }, required: ["moving", "objects"], additionalProperties: false };
        const r = await askVideo({ response_format: { type: "json_schema", json_schema: { name: "clip", schema } } });
        const c = r.choices[0];
        assert(c.finish_reason === "stop", `finish_reason ${c.finish_reason}: ${short(c.message.content)}`);
        const problem = schemaValidator(schema)(JSON.parse(c.message.content));
        assert(!problem, `invalid: ${short(c.message.content)}: ${problem}`);
        // 3 groups x (2 x 3 merged tokens + "Time: X.Xs" + a separator or the end) + vid_start
        assert(r.usage.prompt_tokens > 3 * 6 + 3 * 4, `prompt_tokens ${r.usage.prompt_tokens}`);
    });
    await check("video.prefix_cache_same_hits_other_frames_miss", async () => {
        const h0 = await hits();
        const r1 = await askVideo(); // the clip of the check above
        const h1 = await hits();
        const r2 = await askVideo({ mm_processor_kwargs: { num_frames: 4 } }); // frames 0, 24 | 49, 74
        const h2 = await hits();
        const n = r1.usage.prompt_tokens;
        console.log(`  prompt ${n} tokens (${r2.usage.prompt_tokens} at num_frames 4); hits: same clip +${h1 - h0}, other frames +${h2 - h1}`);
        assert(h1 - h0 >= 16 * Math.floor((n - 1) / 16) - 16, `same clip: +${h1 - h0} hits of ${n}`);
        assert(h2 - h1 <= 48 && h2 - h1 < h1 - h0 - 32, `other frames reused too much (+${h2 - h1} vs +${h1 - h0})`);
    });
    await check("video.errors_name_the_field", async () => {
        const body = (url, extra = {}) => ({ body: { model: "v", max_tokens: 4, messages: [{ role: "user", content: [{ type: "text", text: "x" }, { type: "video_url", video_url: { url } }] }], ...extra } });
        let r = await http(srv.base, "POST", "/v1/chat/completions", body("data:video/mp4;base64," + clip.subarray(0, 2000).toString("base64")));
        expectError(r, 400, ["messages[0].content[1].video_url", "video:"]);
        r = await http(srv.base, "POST", "/v1/chat/completions", body("data:video/mp4;base64,AAAA"));
        expectError(r, 400, ["messages[0].content[1].video_url", "video:"]);
        r = await http(srv.base, "POST", "/v1/chat/completions", body(clipUrl, { mm_processor_kwargs: { num_frames: 0 } }));
        expectError(r, 400, ["mm_processor_kwargs.num_frames"]);
        r = await http(srv.base, "POST", "/v1/chat/completions", body(clipUrl, { mm_processor_kwargs: { fps: "fast" } }));
        expectError(r, 400, ["mm_processor_kwargs.fps"]);
    });
    await check("remote.same_as_inline", async () => {
        const viaHttp = await ask(`${hostUrl}/a.png`, { max_tokens: 4 });
        const viaData = await ask(dataUrl(imgA), { max_tokens: 4 });
        assert(viaHttp.choices[0].message.content === viaData.choices[0].message.content, "an http URL and the same bytes inline answer differently");
    });
    await check("remote.refusals_say_why", async () => {
        const body = (url) => ({ body: { model: "v", max_tokens: 4, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }] }] } });
        const cases = [
            [`http://localhost:${host.address().port}/a.png`, "not in --allowed-media-domains"],
            [`${hostUrl}/missing.png`, "HTTP 404"],
            [`${hostUrl}/redirect`, "redirects are not followed"],
            [`${hostUrl}/big`, "media limit"],
            [`${hostUrl}/slow`, "timed out"],
            [`ftp://127.0.0.1/a.png`, "scheme"],
        ];
        for (const [url, want] of cases) {
            const t0 = Date.now();
            const r = await http(srv.base, "POST", "/v1/chat/completions", body(url));
            expectError(r, 400, ["messages[0].content[0].image_url", want], `${url}: `);
            assert(Date.now() - t0 < 5000, `${url}: answered after ${Date.now() - t0} ms`);
        }
    });
} finally {
    for (const r of stalled) r.destroy();
    host.close();
    await srv.stop();
    fs.rmSync(media, { recursive: true, force: true });
}
console.log(failed ? `vision: ${failed} FAILED` : "vision: OK");
process.exit(failed ? 1 : 0);
