#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# Reference renderer for `glint chat render`: runs the Muse Glimmer release template under
# python3-jinja2 with the environment Hugging Face transformers uses for chat templates
# (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, raise_exception,
# tojson = json.dumps(ensure_ascii=False, sort_keys=False), bos_token "<|begin_of_text|>").
# strftime_now is deliberately NOT defined, so the date line appears only with current_date.
# The request-level normalisation an OpenAI server does before templating is done here the same
# way glint does it (src/chat/render.h): reasoning_effort -> reasoning_strength when the kwarg is
# absent, `reasoning` -> `reasoning_content`, string tool-call arguments JSON-decoded, OpenAI
# content parts (image_url, input_image, video_url, input_text) mapped to image/video/text.
# continue_final_message cuts the prompt after the final message's text as transformers'
# apply_chat_template does (continue_final, transcribed from transformers).
# Tools as vLLM's request model holds them: a function without description or parameters has
# them as None (pydantic FunctionDefinition defaults), which tojson writes as null.
# Usage: chat_render_ref.py TEMPLATE REQUEST.json  -> prompt on stdout, or "ERROR: ..." + exit 1;
#        chat_render_ref.py TEMPLATE --out DIR REQ.json...  -> DIR/NAME.ref (or NAME.referr) each.
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


PART_MAP = {"image_url": "image", "input_image": "image", "video_url": "video",
            "input_text": "text"}


def normalise(req):
    msgs = []
    for i, m in enumerate(req.get("messages", [])):
        m = dict(m)
        if "reasoning_content" not in m and "reasoning" in m:
            m["reasoning_content"] = m["reasoning"]
        if isinstance(m.get("content"), list):
            parts = []
            for p in m["content"]:
                if isinstance(p, dict) and p.get("type") in PART_MAP:
                    p = dict(p)
                    p["type"] = PART_MAP[p["type"]]
                parts.append(p)
            m["content"] = parts
        if isinstance(m.get("tool_calls"), list):
            tcs = []
            for tc in m["tool_calls"]:
                if isinstance(tc, dict) and isinstance(tc.get("function"), dict) and \
                        isinstance(tc["function"].get("arguments"), str):
                    tc = dict(tc)
                    tc["function"] = dict(tc["function"])
                    tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
                tcs.append(tc)
            m["tool_calls"] = tcs
        msgs.append(m)
    return msgs


def normalise_tools(tools):
    """vLLM's request model gives a function its optional fields: a missing description or
    parameters becomes None (model_dump keeps it), which the template's tojson prints as null."""
    if not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        if isinstance(t, dict):
            t = dict(t)
            fn = t.get("function") if isinstance(t.get("function"), dict) else None
            fn = dict(fn if fn is not None else t)
            for k in ("description", "parameters"):
                fn.setdefault(k, None)
            if "function" in t:
                t["function"] = fn
            else:
                t = fn
        out.append(t)
    return out


def continue_final(rendered, final):
    """transformers' apply_chat_template(continue_final_message=True): cut the prompt right after
    the final message's text, so the model continues it."""
    if isinstance(final, (list, tuple)):
        for block in reversed(final):
            if "text" in block:
                final = block["text"]
                break
        else:
            raise ValueError("continue_final_message is set but the final message has no text")
    if final.strip() not in rendered:
        raise ValueError("continue_final_message is set but the final message does not appear")
    loc = rendered.rindex(final.strip())
    if rendered[loc:loc + len(final.lstrip())] == final:
        return rendered[:loc + len(final.lstrip())]
    return rendered[:loc + len(final.strip())]


def render(env, src, path):
    """Returns (ok, text): the prompt, or the error the template (or argument decoding) raised."""
    with open(path, encoding="utf-8") as f:
        req = json.load(f)
    kw = dict(req.get("chat_template_kwargs") or {})
    args = {k: kw[k] for k in ("reasoning_strength", "current_date", "knowledge_cutoff",
                               "tool_namespace_descriptions") if k in kw}
    if "reasoning_strength" not in args and req.get("reasoning_effort") is not None:
        args["reasoning_strength"] = req["reasoning_effort"]
    try:
        msgs = normalise(req)
        text = env.from_string(src).render(
            messages=msgs, tools=normalise_tools(req.get("tools")), bos_token="<|begin_of_text|>",
            add_generation_prompt=req.get("add_generation_prompt", True), **args)
        if req.get("continue_final_message"):
            text = continue_final(text, msgs[-1]["content"])
        return True, text
    except Exception as e:  # template errors, TypeErrors on bad values, bad argument JSON
        return False, "ERROR: %s: %s" % (type(e).__name__, e)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        src = f.read()
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    if sys.argv[2] != "--out":
        ok, text = render(env, src, sys.argv[2])
        sys.stdout.write(text if ok else text + "\n")
        sys.exit(0 if ok else 1)
    for path in sys.argv[4:]:
        ok, text = render(env, src, path)
        name = os.path.splitext(os.path.basename(path))[0]
        for stale in (".ref", ".referr"):
            if os.path.exists(os.path.join(sys.argv[3], name + stale)):
                os.remove(os.path.join(sys.argv[3], name + stale))
        with open(os.path.join(sys.argv[3], name + (".ref" if ok else ".referr")), "w",
                  encoding="utf-8", newline="") as f:
            f.write(text)


main()
