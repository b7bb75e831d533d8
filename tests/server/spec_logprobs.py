#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# spec_logprobs.py GLINT MODEL: requests with logprobs give the same reply with ngram speculation
# on as off (issue 22: "A request with logprobs still works"). Two `glint serve` on MODEL, one with
# --speculative-config ngram (k 3, lookup 1..3). MODEL has every layer sliding (window 8, 3
# layers: make-model --layers 3 --pattern period), so a position sees only the last 22 tokens and
# a copied span longer than that is continued as the first time: the prompt S + S[:30], with S =
# P + the server off's greedy continuation of P, makes the ngram drafts right, and drafts are
# accepted (a random model with a global layer accepts none, so the cost model never drafts).
# Completions (logprobs 5, return_token_ids; greedy and seeded temperature 1; streamed and not)
# and chat (logprobs, top_logprobs 3; continue_final_message on a content copied the same way;
# streamed and not), 3 rounds: every logprobs entry (token, logprob, top logprobs, text_offset /
# bytes), text, ids, finish and usage equal, streamed replies compared concatenated over their
# chunks (speculation groups tokens differently). The server with speculation must have accepted
# draft tokens (/metrics), and a logprob changed by 1e-6 in its reply must be caught (control).
# Loopback only, every wait bounded. Run by tests/server/spec_equal.sh logprobs (by hand).
import copy
import json
import random
import re
import sys

from spec_lib import Server, print_difference, reply_objects, request

GLINT, MODEL = sys.argv[1], sys.argv[2]
SPEC = '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":1,"prompt_lookup_max":3}'


def reply(port, path, body):
    """What a client sees: per choice text, logprobs entries, ids, finish; and usage. Streamed
    replies are concatenated over their chunks (speculation changes how tokens are grouped)."""
    chat = path.endswith("chat/completions")
    out, usage = {}, None
    for o in reply_objects(port, path, body):
        usage = o.get("usage") or usage
        for ch in o.get("choices", []):
            d = out.setdefault(ch["index"], {"text": "", "lp": {}, "ids": [], "finish": None})
            src = (ch.get("message") or ch.get("delta") or {}) if chat else ch
            d["text"] += src.get("content" if chat else "text") or ""
            d["ids"] += ch.get("token_ids") or []
            lp = ch.get("logprobs") or {}
            for k, v in lp.items():
                d["lp"].setdefault(k, []).extend(v or [])
            d["finish"] = ch.get("finish_reason") or d["finish"]
    return {"choices": out, "usage": usage}


def spec_metrics(port):
    m = request(port, "/metrics", None)
    return {k: float(v) for k, v in re.findall(r"^(vllm:spec_decode_\w+)\{[^}]*\} (\S+)$", m,
                                               re.M)}


def main():
    rng = random.Random(22)
    prompt = [rng.randrange(1000, 60000) for _ in range(20)]
    off, on = Server(GLINT, MODEL, []), Server(GLINT, MODEL, ["--speculative-config", SPEC])
    try:
        gen = {"max_tokens": 40, "temperature": 0, "ignore_eos": True, "return_token_ids": True}
        for srv in (off, on):  # both: the same prefix-cache state (usage reports cached tokens)
            g = json.loads(request(srv.port, "/v1/completions", dict(gen, prompt=prompt)))
        s = prompt + g["choices"][0]["token_ids"]
        q = s + s[:30]
        chat0 = {"messages": [{"role": "user", "content": "Go on."},
                              {"role": "assistant", "content": "alpha beta gamma delta epsilon "
                               "zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma"}],
                 "continue_final_message": True, "add_generation_prompt": False}
        for srv in (off, on):
            c = json.loads(request(srv.port, "/v1/chat/completions",
                                   dict(chat0, max_tokens=40, temperature=0)))
        y = chat0["messages"][1]["content"] + (c["choices"][0]["message"]["content"] or "")
        chat = copy.deepcopy(chat0)
        chat["messages"][1]["content"] = y + " " + y
        cases = []
        for stream in (False, True):
            for seeded in (False, True):
                b = {"prompt": q, "max_tokens": 32, "ignore_eos": True, "logprobs": 5,
                     "return_token_ids": True, "stream": stream}
                b.update({"temperature": 1, "top_k": 40, "seed": 7} if seeded
                         else {"temperature": 0})
                cases.append(("/v1/completions", b))
            cases.append(("/v1/chat/completions",
                          dict(chat, max_tokens=32, temperature=0, logprobs=True, top_logprobs=3,
                               return_token_ids=True, stream=stream)))
        for c in cases:
            if c[1].get("stream"):
                c[1]["stream_options"] = {"include_usage": True}
        bad, last, acc_case = 0, None, [0.0] * len(cases)
        for rnd in range(3):  # the cost model learns the acceptance from the first rounds
            for ci, (path, b) in enumerate(cases):
                acc0 = spec_metrics(on.port).get("vllm:spec_decode_num_accepted_tokens_total", 0)
                a, s = reply(off.port, path, b), reply(on.port, path, b)
                acc_case[ci] += spec_metrics(on.port).get(
                    "vllm:spec_decode_num_accepted_tokens_total", 0) - acc0
                n = sum(len(d["ids"]) for d in a["choices"].values())
                if a != s:
                    bad += 1
                    print_difference(f"round {rnd} {path} stream={b['stream']} T={b['temperature']}",
                                     a, s)
                elif rnd == 0:
                    print(f"  {path} stream={b['stream']} T={b['temperature']}: {n} tokens, "
                          f"logprobs equal")
                last = s
        for (path, b), n_acc in zip(cases, acc_case):
            print(f"  {path} stream={b['stream']} T={b['temperature']}: {n_acc:g} draft tokens "
                  f"accepted over 3 rounds")
        val = spec_metrics(on.port)
        drafts = val.get("vllm:spec_decode_num_drafts_total", 0)
        acc = val.get("vllm:spec_decode_num_accepted_tokens_total", 0)
        dtok = val.get("vllm:spec_decode_num_draft_tokens_total", 0)
        ctl = copy.deepcopy(last)
        ch0 = next(iter(ctl["choices"].values()))
        key = "content" if "content" in ch0["lp"] else "token_logprobs"
        if key == "content":
            ch0["lp"][key][-1]["logprob"] += 1e-6
        else:
            ch0["lp"][key][-1] += 1e-6
        caught = ctl != last
        print(f"spec logprobs: {len(cases) * 3 - bad}/{len(cases) * 3} replies equal; speculation: "
              f"{drafts:g} drafts, {dtok:g} draft tokens, {acc:g} accepted; control caught: {caught}")
        ok = bad == 0 and acc > 0 and caught
        print("PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)
    finally:
        off.stop()
        on.stop()


main()
