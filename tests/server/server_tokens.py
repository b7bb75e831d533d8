#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# server_tokens.py: "same tokens as the engine". Driven by tests/server/check_server_tokens.sh.
#   python3 tests/server/server_tokens.py GLINT_BIN MODEL
# 8 seeded requests (4 greedy, 4 at temperature 1 with distinct seeds, some with top_k / top_p /
# min_p; token-id prompts of 3..37 ids; max_tokens 24, ignore_eos) go to `glint serve`'s
# /v1/completions with return_token_ids (a vLLM extra: the completion's token ids). Reference:
# `glint run --prompt-ids ... -n 24 --temp T --seed S --top-k K --top-p P --min-p M --ids`, the
# single-sequence path (contiguous f32 KV, its own RNG stream seeded with S), with every sampling
# parameter passed explicitly on both sides (run's --temp default is 0, the server's 1; off is
# top_k 0, top_p 1, min_p 0 on both). The server runs with --kv-cache-dtype f32 so that both keep
# the same KV precision, and --deep-health-interval 0 so that "alone" means alone.
#   (a) the 8 one after another, each alone in the engine;
#   (b) the 8 fired together with 8 unrelated requests (n=2, temperature 1; some extend a tested
#       prompt, one is long) on a server with max-num-seqs 16 and max-num-batched-tokens 32, so
#       24 sequences share the batch, some queue, long prompts are prefilled in chunks next to
#       decodes, and the tested prompts hit the prefix cache filled by (a). Half of the tested
#       requests stream (token_ids deltas concatenated), two ask for logprobs.
# Every one of the 16 (8 x 2) must give run's ids exactly. Text is checked too: the server's
# text must equal run's printed bytes decoded by Python with errors="replace" (one U+FFFD per
# maximal invalid subpart, as HF tokenizers and so vLLM do), and a stream's text must equal the
# non-stream text. A corrupted id must be caught by the same comparison (negative control). Exit 0 only if all of that holds.
# Every wait is bounded: HTTP timeouts, subprocess timeouts, a server start deadline.
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import http.client

GLINT, MODEL = sys.argv[1], sys.argv[2]
N_TOK = 24
# GL_TEST_TIMEOUT_SCALE=K multiplies every wait (a slow device such as lavapipe: a step of the
# tiny preset there takes ~1 s, against ~20 ms on the CPU); the checks stay the same.
SCALE = float(os.environ.get("GL_TEST_TIMEOUT_SCALE") or 1)
HTTP_TIMEOUT = 120 * SCALE

# ---- the 8 tested requests and the 8 unrelated ones ----


def ids_for(i, n):
    return [(i * 7919 + k * 104729 + 13) % 199000 for k in range(n)]


TESTED = [
    # (temperature, seed, top_k, top_p, min_p, prompt length)
    (0.0, 0, 0, 1.0, 0.0, 3),
    (0.0, 11, 5, 0.5, 0.0, 9),
    (0.0, 123, 0, 1.0, 0.2, 17),
    (0.0, 7, 40, 0.9, 0.05, 37),
    (1.0, 1, 0, 1.0, 0.0, 5),
    (1.0, 42, 40, 1.0, 0.0, 12),
    (1.0, 2024, 0, 0.8, 0.0, 24),
    (1.0, 987654321, 100, 0.95, 0.05, 31),
]
tested = []
for i, (t, s, k, p, m, n) in enumerate(TESTED):
    tested.append({"prompt": ids_for(i, n), "temperature": t, "seed": s, "top_k": k, "top_p": p,
                   "min_p": m})

unrelated = []
for j in range(8):
    if j % 2 == 0:  # extends a tested prompt: shares its cached blocks / prefix
        prompt = tested[j]["prompt"] + ids_for(100 + j, 4 + j)
    elif j == 7:  # long: prefilled in several 32-token chunks while others decode
        prompt = ids_for(200 + j, 150)
    else:
        prompt = ids_for(300 + j, 6 + 5 * j)
    unrelated.append({"prompt": prompt, "n": 2, "temperature": 1.0, "seed": 5000 + j,
                      "top_p": 0.9 if j % 3 == 0 else 1.0, "max_tokens": 16 + 4 * j,
                      "ignore_eos": True, "return_token_ids": True})

# ---- reference: glint run ----


def run_ref(q):
    argv = [GLINT, "run", "--model", MODEL, "--prompt-ids", " ".join(map(str, q["prompt"])),
            "-n", str(N_TOK), "--temp", repr(q["temperature"]), "--seed", str(q["seed"]),
            "--top-k", str(q["top_k"]), "--top-p", repr(q["top_p"]), "--min-p",
            repr(q["min_p"]), "--ids"]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=120 * SCALE)
    if r.returncode != 0:
        raise SystemExit(f"glint run failed ({r.returncode}): {r.stderr.decode(errors='replace')}")
    out = r.stdout
    # stdout = TEXT "\n" IDS "\n"
    assert out.endswith(b"\n"), out[-50:]
    body, _, ids_line = out[:-1].rpartition(b"\n")
    return [int(x) for x in ids_line.split()], body


def server_lossy(b):
    """Invalid UTF-8 -> U+FFFD per maximal invalid subpart: Python's own decoder, the same rule as
    HF tokenizers' lossy decode that vLLM uses (the server must match it)."""
    return b.decode("utf-8", "replace")


# ---- the server ----

# GL_SERVE_DEVICE=vulkan[:N]: the server runs its forward pass there while `glint run` (the
# reference) stays on the CPU (issue 20: the server on the device gives the CPU's tokens).
SERVE_DEVICE = ["--device", os.environ["GL_SERVE_DEVICE"]] if os.environ.get("GL_SERVE_DEVICE") else []
# GL_SERVE_EXTRA_ARGS='["--flag", "value", ...]' (a JSON array): appended to every server's
# arguments, e.g. a --speculative-config (issue 22: the server gives run's tokens with it on).
SERVE_EXTRA = json.loads(os.environ.get("GL_SERVE_EXTRA_ARGS") or "[]")


class Server:
    def __init__(self, extra):
        self.log = open(os.environ.get("TMPDIR_TOK", "/tmp") + f"/serve-{os.getpid()}.log", "w+")
        self.p = subprocess.Popen(
            [GLINT, "serve", "--model", MODEL, "--host", "127.0.0.1", "--port", "0",
             "--kv-cache-dtype", "f32", "--deep-health-interval", "0", "--shutdown-timeout", "2"]
            + SERVE_DEVICE + SERVE_EXTRA + extra, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 90 * SCALE
        self.port = None
        while time.time() < deadline and self.p.poll() is None:
            self.log.seek(0)
            m = re.search(r"serving .* at http://127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            time.sleep(0.1)
        if not self.port:
            self.stop()
            raise SystemExit("server did not start:\n" + self.text())

    def text(self):
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(15 * SCALE)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(5)


def post(port, body):
    """POST /v1/completions; returns (ids, text, logprob tokens, finish reasons, raw)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=HTTP_TIMEOUT)
    try:
        c.request("POST", "/v1/completions", json.dumps(body),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            raise RuntimeError(f"HTTP {r.status}: {r.read()[:500]!r}")
        n = body.get("n", 1)
        ids = [[] for _ in range(n)]
        text = ["" for _ in range(n)]
        lp = [[] for _ in range(n)]
        fin = [None] * n
        if not body.get("stream"):
            o = json.loads(r.read())
            for ch in o["choices"]:
                i = ch["index"]
                ids[i], text[i], fin[i] = ch.get("token_ids"), ch["text"], ch["finish_reason"]
                if ch.get("logprobs"):
                    lp[i] = ch["logprobs"]["tokens"]
            return ids, text, lp, fin
        done = False
        for raw in r:  # SSE: "data: {...}\n\n" ... "data: [DONE]\n\n"
            line = raw.decode("utf-8").strip()
            if not line:
                continue
            assert line.startswith("data: "), line
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            o = json.loads(data)
            if "error" in o:
                raise RuntimeError(f"stream error: {data}")
            for ch in o["choices"]:
                i = ch["index"]
                ids[i] += ch.get("token_ids") or []
                text[i] += ch.get("text") or ""
                if ch.get("logprobs"):
                    lp[i] += ch["logprobs"]["tokens"]
                if ch.get("finish_reason"):
                    fin[i] = ch["finish_reason"]
        if not done:
            raise RuntimeError("stream ended without [DONE]")
        return ids, text, lp, fin
    finally:
        c.close()


def metrics(port):
    """vllm:* gauges and counters from GET /metrics, as {name: value}."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        text = r.read().decode()
    finally:
        c.close()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_:]+)\{[^}]*\} (\S+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def tested_body(q, stream=False, logprobs=False):
    b = {"prompt": q["prompt"], "max_tokens": N_TOK, "ignore_eos": True, "return_token_ids": True,
         "temperature": q["temperature"], "seed": q["seed"], "top_k": q["top_k"],
         "top_p": q["top_p"], "min_p": q["min_p"], "n": 1}
    if stream:
        b["stream"] = True
    if logprobs:
        b["logprobs"] = 1
    return b


def main():
    # glint run stops at EOS/EOT; the server (ignore_eos) does not: compare up to run's length,
    # and then the server must have produced that same EOS id at that position.
    refs = [run_ref(q) for q in tested]
    for i, (ids, _) in enumerate(refs):
        if len(ids) != N_TOK:
            print(f"  note: glint run stopped at EOS after {len(ids)} tokens for request {i}")

    # (a) alone, on a server with default scheduling limits
    srv = Server([])
    res_a = []
    try:
        for i, q in enumerate(tested):
            res_a.append(post(srv.port, tested_body(q, logprobs=(i in (2, 6)))))
    finally:
        srv.stop()
    log_a = srv.text()

    # (b) the 8 together with 8 unrelated requests (24 sequences), prefix cache warmed by a
    # first pass of the 8 alone on this same server
    srv = Server(["--max-num-seqs", "16", "--max-num-batched-tokens", "32"])
    res_b = [None] * 8
    other = [None] * 8
    errors = []
    try:
        for q in tested:  # warm the prefix cache (results not compared again)
            post(srv.port, tested_body(q))
        barrier = threading.Barrier(16, timeout=30)

        def go(kind, i):
            try:
                barrier.wait()
                if kind == "t":
                    res_b[i] = post(srv.port, tested_body(tested[i], stream=(i % 2 == 1),
                                                          logprobs=(i in (3, 4))))
                else:
                    other[i] = post(srv.port, dict(unrelated[i], stream=(i % 3 == 0)))
            except Exception as e:  # noqa: BLE001
                errors.append(f"{kind}{i}: {e}")

        threads = [threading.Thread(target=go, args=(k, i)) for i in range(8) for k in "tu"]
        m0 = metrics(srv.port)
        for t in threads:
            t.start()
        # sample the scheduler while the 16 run: how many sequences shared a step
        peak_run = peak_wait = 0
        deadline = time.time() + HTTP_TIMEOUT + 40
        while any(t.is_alive() for t in threads) and time.time() < deadline:
            m = metrics(srv.port)
            peak_run = max(peak_run, m.get("vllm:num_requests_running", 0))
            peak_wait = max(peak_wait, m.get("vllm:num_requests_waiting", 0))
            time.sleep(0.01)
        for t in threads:
            t.join(max(1, deadline - time.time()))
        if any(t.is_alive() for t in threads):
            errors.append("a request thread did not finish in time")
        m1 = metrics(srv.port)
        hits = m1.get("vllm:prefix_cache_hits_total", 0) - m0.get("vllm:prefix_cache_hits_total", 0)
        preempt = m1.get("vllm:num_preemptions_total", 0) - m0.get("vllm:num_preemptions_total", 0)
        sched = (f"batched phase: peak {peak_run:g} sequences running, {peak_wait:g} waiting; "
                 f"{hits:g} prompt tokens from the prefix cache; {preempt:g} preemptions")
        if "vllm:spec_decode_num_drafts_total" in m1:  # only with --speculative-config
            sched += (f"; speculation over the server's life: "
                      f"{m1['vllm:spec_decode_num_drafts_total']:g} drafts, "
                      f"{m1.get('vllm:spec_decode_num_draft_tokens_total', 0):g} draft tokens, "
                      f"{m1.get('vllm:spec_decode_num_accepted_tokens_total', 0):g} accepted")
    finally:
        srv.stop()
    if errors:
        print("server_tokens: request errors:\n  " + "\n  ".join(errors))
        print(srv.text()[-3000:])
        return 1

    def same(ref_ids, got):
        ids = got[0][0]
        if ids is None:
            return False
        if len(ref_ids) < N_TOK:  # run stopped at EOS
            return len(ids) == N_TOK and ids[:len(ref_ids)] == ref_ids
        return ids == ref_ids

    ok_ids = ok_text = 0
    lines = []
    for phase, res in (("alone", res_a), ("batched", res_b)):
        for i, got in enumerate(res):
            ref_ids, ref_bytes = refs[i]
            ids, text, lp, fin = got[0][0], got[1][0], got[2][0], got[3][0]
            id_ok = same(ref_ids, got)
            want_text = server_lossy(ref_bytes)
            t_ok = text == want_text or len(ref_ids) < N_TOK
            ok_ids += id_ok
            ok_text += t_ok
            q = tested[i]
            tag = (f"T={q['temperature']:g} seed={q['seed']} k={q['top_k']} p={q['top_p']:g} "
                   f"min_p={q['min_p']:g} prompt={len(q['prompt'])} ids")
            extra = []
            if lp and len(lp) != len(ids or []):
                extra.append(f"logprobs.tokens has {len(lp)} entries for {len(ids)} ids")
                id_ok = False
            if fin != "length":
                extra.append(f"finish_reason {fin!r} (want 'length')")
            lines.append(f"  {phase:7s} #{i} {tag:58s} ids {'ok' if id_ok else 'DIFFER'}"
                         f", text {'ok' if t_ok else 'DIFFER'}" + ("; " + "; ".join(extra)
                                                                  if extra else ""))
            if not id_ok:
                first = next((k for k, (a, b) in enumerate(zip(ids or [], ref_ids)) if a != b),
                             min(len(ids or []), len(ref_ids)))
                lines.append(f"      first difference at token {first}\n"
                             f"      server {ids}\n      run    {ref_ids}")
            if not t_ok:
                lines.append(f"      server text {text!r}\n      run text    {want_text!r}")
    # unrelated requests: complete, right lengths (not compared to anything else)
    bad_other = []
    for j, got in enumerate(other):
        for c in range(2):
            if got is None or got[0][c] is None or len(got[0][c]) != unrelated[j]["max_tokens"]:
                bad_other.append(j)
    # streamed (b) text must also equal the non-streamed (a) text
    stream_text_ok = all(res_b[i][1][0] == res_a[i][1][0] for i in range(8))
    # negative control
    bad = list(refs[5][0])
    bad[7] ^= 1
    caught = not same(bad, res_a[5])
    print("\n".join(lines))
    print("  " + sched)
    n = 2 * len(tested)
    print(f"server vs glint run: token ids {ok_ids}/{n} identical, text {ok_text}/{n}; "
          f"stream text == non-stream: {stream_text_ok}; unrelated requests complete: "
          f"{not bad_other}; control caught: {caught}")
    if "engine step failed" in log_a:
        print("  server log (a) reports an engine failure")
        return 1
    shared = peak_run >= 16  # the 16 requests (24 sequences) really shared the batch
    if not shared:
        print("  the batched phase never ran 16 sequences at once: not the test it claims to be")
    return 0 if (ok_ids == n and ok_text == n and stream_text_ok and not bad_other and caught
                 and shared) else 1


if __name__ == "__main__":
    sys.exit(main())
