// SPDX-License-Identifier: MIT
// chat/render: an OpenAI chat request body -> the exact prompt text that the Muse Glimmer release
// chat template (shared/data/chat-template/muse-glimmer.jinja, muse-glimmer-arch.md §5) renders
// under Jinja2 with Hugging Face's chat-template environment, byte for byte.
// Why native and not a Jinja interpreter: the template is fixed (its SHA is pinned by the
// model), a direct C transcription is small, fast and easy to make hostile-input safe, and the
// oracle (tests/oracle/check_chat_render.sh, python3-jinja2 running the real template on 60+
// requests) pins it byte-for-byte. A small Jinja interpreter for arbitrary GGUF templates is
// future work. Contract: this file follows the template's control flow macro by macro; every
// place where Jinja would raise (raise_exception, TypeError on `str + non-str`, tojson of an
// undefined value) is a GL_E_INVAL naming the messages[i] / tools[i] index instead.
#pragma once

#include "base/base.h"

#include <jansson.h>
#include <stddef.h>

// Renders the request body `req` (borrowed, not modified): an object with
//   messages (array, required): {role, content, reasoning_content | reasoning, tool_calls,
//       tool_call_id, name, recipient, end_turn}; role system | user | assistant | tool, other
//       string roles (developer, ...) are dropped as the template drops them; content is a
//       string, null, or an array of parts (text / input_text, image / image_url / input_image,
//       video / video_url; other part types are dropped);
//   tools (array of {type, function: {name, description, parameters}} or bare functions; an
//       absent description or parameters renders as null, as vLLM's request model makes it None);
//   chat_template_kwargs: reasoning_strength, current_date, knowledge_cutoff,
//       tool_namespace_descriptions (other keys are ignored);
//   reasoning_effort: used as reasoning_strength when that kwarg is absent;
//   add_generation_prompt (default true).
// Request normalisation done before templating (as an OpenAI server does; the oracle harness
// does the same): `reasoning` stands in for a missing `reasoning_content`; tool-call `arguments`
// given as a JSON string are decoded (invalid JSON is an error naming the message index); OpenAI
// part types are mapped to the template's image/video/text. strftime_now is not provided, so the
// "Current date" line appears only when current_date is given (the server passes today's date
// there if it wants one). A message that is not an object or has no string role is an error,
// although the template would silently skip it.
// On GL_OK *out is a NUL-terminated string owned by the caller (free with gl_free) and *out_len
// its length (the text may contain NUL bytes from the request); on error *out is NULL and err
// says what, where (messages[i] / tools[i]) and why.
gl_status gl_chat_render(const json_t *req, char **out, size_t *out_len, struct gl_err *err);

// Hugging Face's `tojson` of v: json.dumps(ensure_ascii=False), i.e. ", " and ": " separators,
// key order as given, non-ASCII kept raw, only " \\ and C0 controls escaped, floats as Python
// repr (1.0, 1e-05, 1e+16). Returns a gl_malloc'ed NUL-terminated string (length in *len if
// len is not NULL), or NULL for a non-finite real, nesting deeper than 512, or out of memory.
char *gl_chat_tojson(const json_t *v, size_t *len);
