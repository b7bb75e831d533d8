#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# spec_structured.py GLINT MODEL: structured-output requests give the same reply with ngram
# speculation on as off, through the server's own processors (src/api/proc.c) on the real 202k
# vocabulary, jump-forward included (issue 22: "greedy output ... token-identical to speculation
# off ... under every structured-output kind"; the engine test test_spec covers the kinds on a
# micro vocabulary without jump-forward). Two `glint serve` on MODEL, one with ngram (k 4, lookup
# 1..3). MODEL has every layer sliding (window 8, 3 layers), so a position sees only the last ~22
# tokens: a context repeated ends like the first time and the model continues it the same way,
# which makes the ngram drafts right (a model with a global layer accepts none, and the cost model
# then stops drafting, which would leave nothing to compare). Per kind G (json_schema with forced
# keys, json_object, regex, choice, GBNF; chat with json_schema, tools required and a named tool):
# the server off's greedy answer g to a prompt P under G, then the prompt P + g + P under G (chat:
# the same user turn again after an assistant turn holding g), greedy and seeded temperature 1
# with top_k / top_p / min_p, streamed and not, to both servers: text, token ids, finish, usage
# and tool calls equal, streams compared concatenated over their chunks (speculation groups tokens
# differently). Non-vacuous: accepted draft tokens > 0 and drafts verified in steps that computed
# jump-forward runs (glint:spec_decode_jump_forward_drafts_total) > 0 on /metrics, and a changed
# token id in a reply must be caught (control). Loopback only, every wait bounded. Run by
# tests/server/spec_equal.sh structured (by hand).
import copy
import json
import random
import re
import sys

from spec_lib import Server, print_difference, reply_objects, request

GLINT, MODEL = sys.argv[1], sys.argv[2]
SPEC = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":1,"prompt_lookup_max":3}'


def reply(port, path, body):
    """What a client sees: per choice text, ids, tool calls, finish; and usage. Streamed replies
    are concatenated over their chunks."""
    chat = path.endswith("chat/completions")
    out, usage = {}, None
    for o in reply_objects(port, path, body):
        usage = o.get("usage") or usage
        for ch in o.get("choices", []):
            d = out.setdefault(ch["index"], {"text": "", "ids": [], "tools": "", "reasoning": "",
                                               "finish": None})
            src = (ch.get("message") or ch.get("delta") or {}) if chat else ch
            d["text"] += src.get("content" if chat else "text") or ""
            d["reasoning"] += (src.get("reasoning") or "") if chat else ""
            d["ids"] += ch.get("token_ids") or []
            for tc in src.get("tool_calls") or []:
                f = tc.get("function") or {}
                d["tools"] += (f.get("name") or "") + (f.get("arguments") or "")
            d["finish"] = ch.get("finish_reason") or d["finish"]
    return {"choices": out, "usage": usage}


def metrics(port):
    m = request(port, "/metrics", None)
    return {k: float(v) for k, v in re.findall(
        r"^((?:vllm|glint):spec_decode_\w+)\{[^}]*\} (\S+)$", m, re.M)}


SCHEMA = {"type": "object", "additionalProperties": False,
          "required": ["invoice_number", "vendor", "status", "lines"],
          "properties": {
              "invoice_number": {"type": "string", "maxLength": 12},
              "vendor": {"type": "object", "additionalProperties": False,
                         "required": ["name", "country_code"],
                         "properties": {"name": {"type": "string", "maxLength": 16},
                                        "country_code": {"enum": ["DE", "FR", "US", "JP"]}}},
              "status": {"enum": ["paid_in_full", "partially_paid", "overdue_notice_sent"]},
              "lines": {"type": "array", "minItems": 1, "maxItems": 3,
                        "items": {"type": "object", "additionalProperties": False,
                                  "required": ["sku", "quantity"],
                                  "properties": {"sku": {"type": "string", "maxLength": 8},
                                                 "quantity": {"type": "integer"}}}}}}
GBNF = ('root ::= "answer: " item (", " item)* "."\n'
        'item ::= "alpha-" [a-z]+ | "beta-" [0-9]+ | "gamma"\n')
KINDS = [
    ("json_schema", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "invoice", "schema": SCHEMA}}}),
    ("json_object", {"response_format": {"type": "json_object"}}),
    ("regex", {"structured_outputs": {
        "regex": r"(order [A-Z]{2}-[0-9]{3,5} shipped to [a-z]{2,8}\. ){1,4}"}}),
    ("choice", {"structured_outputs": {"choice": [
        "the invoice was paid in full on time", "the invoice was paid in part",
        "the invoice is overdue and a notice was sent"]}}),
    ("grammar", {"structured_outputs": {"grammar": GBNF}}),
]
TOOLS = [{"type": "function", "function": {
    "name": "record_invoice", "description": "Records an invoice.",
    "parameters": {"type": "object", "additionalProperties": False,
                   "required": ["invoice_number", "status"],
                   "properties": {"invoice_number": {"type": "string", "maxLength": 12},
                                  "status": {"enum": ["paid", "open"]}}}}},
         {"type": "function", "function": {
             "name": "flag_vendor", "description": "Flags a vendor.",
             "parameters": {"type": "object", "additionalProperties": False,
                            "required": ["vendor_name"],
                            "properties": {"vendor_name": {"type": "string", "maxLength": 16}}}}}]
CHAT_KINDS = [
    ("chat json_schema", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "invoice", "schema": SCHEMA}}}),
    ("chat json_object reasoning", {"response_format": {"type": "json_object"},
                                    "thinking_token_budget": 6}),
    ("chat tools required", {"tools": TOOLS, "tool_choice": "required"}),
    ("chat named tool", {"tools": TOOLS, "tool_choice": {
        "type": "function", "function": {"name": "record_invoice"}}}),
]
SAMPLED = {"temperature": 1, "top_k": 40, "top_p": 0.9, "min_p": 0.05, "seed": 7}


def main():
    rng = random.Random(22)
    off, on = Server(GLINT, MODEL, []), Server(GLINT, MODEL, ["--speculative-config", SPEC])
    try:
        cases = []  # (name, path, body)
        for name, g in KINDS:
            p = [rng.randrange(1000, 60000) for _ in range(20)]
            first = json.loads(request(off.port, "/v1/completions", dict(
                g, prompt=p, max_tokens=48, temperature=0, return_token_ids=True)))
            q = p + first["choices"][0]["token_ids"] + p
            for samp, stream in ((None, False), (None, True), (SAMPLED, False)):
                b = dict(g, prompt=q, max_tokens=48, return_token_ids=True, stream=stream,
                         **(samp or {"temperature": 0}))
                cases.append((f"{name} {'T1' if samp else 'greedy'}"
                              f"{' stream' if stream else ''}", "/v1/completions", b))
            # stop string and a max_tokens cut inside the document
            cases.append((f"{name} stop", "/v1/completions", dict(
                g, prompt=q, max_tokens=48, temperature=0, return_token_ids=True,
                stop=["e"])))
            cases.append((f"{name} max_tokens 7", "/v1/completions", dict(
                g, prompt=q, max_tokens=7, temperature=0, return_token_ids=True)))
        for name, g in CHAT_KINDS:
            user = {"role": "user", "content": "Extract the invoice: INV-2291 from Kessler "
                    "GmbH (DE), overdue, 3 x SKU A-77, 1 x SKU B-12. Answer briefly."}
            first = json.loads(request(off.port, "/v1/chat/completions", dict(
                g, messages=[user], max_tokens=48, temperature=0)))
            msg = first["choices"][0]["message"]
            prev = {"role": "assistant", "content": msg.get("content") or ""}
            if msg.get("tool_calls"):
                prev["tool_calls"] = msg["tool_calls"]
                prev["content"] = None
            msgs = [user, prev] + ([{"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"],
                                     "content": "ok"}] if msg.get("tool_calls") else []) + [user]
            for samp, stream in ((None, False), (None, True), (SAMPLED, False)):
                b = dict(g, messages=msgs, max_tokens=48, return_token_ids=True, stream=stream,
                         **(samp or {"temperature": 0}))
                cases.append((f"{name} {'T1' if samp else 'greedy'}"
                              f"{' stream' if stream else ''}", "/v1/chat/completions", b))
        for _, _, b in cases:
            if b.get("stream"):
                b["stream_options"] = {"include_usage": True}
        bad, last, rounds = 0, None, 2
        per = {}
        for rnd in range(rounds):  # the cost model learns the acceptance in the first round
            for name, path, b in cases:
                m0 = metrics(on.port)
                a, s = reply(off.port, path, b), reply(on.port, path, b)
                m1 = metrics(on.port)
                d = per.setdefault(name, [0, 0, 0])
                for i, key in enumerate(("vllm:spec_decode_num_draft_tokens_total",
                                         "vllm:spec_decode_num_accepted_tokens_total",
                                         "glint:spec_decode_jump_forward_drafts_total")):
                    d[i] += m1.get(key, 0) - m0.get(key, 0)
                if a != s:
                    bad += 1
                    print_difference(f"round {rnd} {name}", a, s)
                elif rnd == 0:
                    n = sum(len(c["ids"]) for c in a["choices"].values())
                    fin = [c["finish"] for c in a["choices"].values()]
                    print(f"  {name}: {n} tokens, finish {fin[0]}, equal")
                last = s
        for name, (dt, acc, jf) in per.items():
            print(f"  {name}: {dt:g} draft tokens, {acc:g} accepted, {jf:g} drafts after "
                  f"jump-forward runs ({rounds} rounds)")
        val = metrics(on.port)
        acc = val.get("vllm:spec_decode_num_accepted_tokens_total", 0)
        dtok = val.get("vllm:spec_decode_num_draft_tokens_total", 0)
        jf = val.get("glint:spec_decode_jump_forward_drafts_total", 0)
        ctl = copy.deepcopy(last)
        ch0 = next(iter(ctl["choices"].values()))
        if ch0["ids"]:
            ch0["ids"][-1] += 1
        caught = ctl != last
        total = len(cases) * rounds
        print(f"spec structured: {total - bad}/{total} replies equal; speculation: {dtok:g} draft "
              f"tokens, {acc:g} accepted, {jf:g} drafts after jump-forward runs; control caught: "
              f"{caught}")
        ok = bad == 0 and acc > 0 and jf > 0 and caught
        print("PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)
    finally:
        off.stop()
        on.stop()


main()
