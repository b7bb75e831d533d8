// SPDX-License-Identifier: MIT
// Unit tests for chat/render: golden prompts from muse-glimmer-arch.md §5.4 (exact bytes), the
// eom/eot and tool-name rules, HF tojson formatting (Python float repr, escapes, key order), and
// the error paths: each names the offending messages[i] / tools[i] and leaves *out NULL.
// The byte-for-byte comparison against Jinja2 lives in tests/oracle/check_chat_render.sh.
#include "chat/render.h"
#include "test.h"

#include <string.h>

// Renders the JSON text `req`; returns the prompt (caller frees) or NULL with *err filled.
static char *render(const char *req, struct gl_err *err, gl_status *st)
{
    json_error_t je;
    json_t *j = json_loads(req, 0, &je);
    if (!j) {
        fprintf(stderr, "  bad test JSON: %s\n", je.text);
        return NULL;
    }
    char *out = (char *)1;
    size_t len = 12345;
    *st = gl_chat_render(j, &out, &len, err);
    json_decref(j);
    if (*st != GL_OK) {
        CHECK(out == NULL && len == 0);
        return NULL;
    }
    CHECK(out && strlen(out) == len);
    return out;
}

static int renders_to(const char *req, const char *want)
{
    struct gl_err err = {0};
    gl_status st;
    char *got = render(req, &err, &st);
    int ok = got && !strcmp(got, want);
    if (!ok)
        fprintf(stderr, "  got:  [%s]\n  want: [%s]\n  err: %s\n", got ? got : "(null)", want,
                err.msg);
    gl_free(got);
    return ok;
}

// Expects failure with a message containing `needle`.
static int fails_with(const char *req, const char *needle)
{
    struct gl_err err = {0};
    gl_status st = GL_OK;
    char *got = render(req, &err, &st);
    int ok = !got && st == GL_E_INVAL && strstr(err.msg, needle);
    if (!ok)
        fprintf(stderr, "  status %d, message [%s], want [%s]\n", st, err.msg, needle);
    gl_free(got);
    return ok;
}

#define SYS_HEAD "<|begin_of_text|><|start|>system<|message|>You are a helpful AI assistant.\n"

TEST(test_golden_no_tools_medium_date)
{
    CHECK(renders_to("{\"messages\":[{\"role\":\"user\",\"content\":\"What is 17 * 23?\"}],"
                     "\"chat_template_kwargs\":{\"reasoning_strength\":\"medium\","
                     "\"current_date\":\"2026-07-29\"}}",
                     SYS_HEAD "Knowledge cutoff: 2026-01-04.\nCurrent date: 2026-07-29.\n\n"
                              "Reasoning strength: medium.\n\n# Valid recipients: \"self\", "
                              "\"user\".<|eot|><|start|>user<|message|>What is 17 * 23?<|eot|>"
                              "<|start|>assistant"));
}

TEST(test_golden_default_high)
{
    CHECK(renders_to("{\"messages\":[{\"role\":\"user\",\"content\":\" hi \"}]}",
                     SYS_HEAD "Knowledge cutoff: 2026-01-04.\n\nReasoning strength: high.\n\n"
                              "# Valid recipients: \"self\", \"user\".<|eot|><|start|>user"
                              "<|message|> hi <|eot|><|start|>assistant"));
}

TEST(test_effort_mapping_and_system_rewrite)
{
    // reasoning_effort stands in for the kwarg; an explicit system line wins and is rewritten.
    CHECK(renders_to("{\"messages\":[{\"role\":\"system\",\"content\":\"S. Reasoning effort: low"
                     "\"}],\"reasoning_effort\":\"max\",\"add_generation_prompt\":false}",
                     "<|begin_of_text|><|start|>system<|message|>S. Reasoning strength: low\n\n"
                     "# Valid recipients: \"self\", \"user\".<|eot|>"));
    CHECK(renders_to("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"}],"
                     "\"reasoning_effort\":\"xhigh\",\"add_generation_prompt\":false}",
                     "<|begin_of_text|><|start|>system<|message|>S\n\nReasoning strength: xhigh."
                     "\n\n# Valid recipients: \"self\", \"user\".<|eot|>"));
}

#define MIN_SYS "{\"role\":\"system\",\"content\":\"reasoning strength: low\"},"
#define MIN_HEAD                                                                                   \
    "<|begin_of_text|><|start|>system<|message|>reasoning strength: low\n\n# Valid recipients: "   \
    "\"self\", \"user\".<|eot|>"

TEST(test_adjacent_assistants_and_tool_names)
{
    // A text message ends by its recipient (eot for user), whatever follows; `reasoning` stands
    // in for reasoning_content. A tool-calling message before another assistant ends in eom.
    CHECK(renders_to("{\"messages\":[" MIN_SYS "{\"role\":\"assistant\",\"content\":\"a\"},"
                     "{\"role\":\"assistant\",\"content\":\"b\",\"reasoning\":\"r\"}],"
                     "\"add_generation_prompt\":false}",
                     MIN_HEAD "<|start|>assistant to=user<|message|>a<|eot|><|start|>assistant "
                              "to=self<|message|>r<|eom|><|start|>assistant to=user<|message|>b"
                              "<|eot|>"));
    // Parallel calls: all but the last end in eom; tool results named via tool_call_id, and by
    // the id itself when nothing matches.
    CHECK(renders_to(
        "{\"messages\":[" MIN_SYS "{\"role\":\"assistant\",\"tool_calls\":["
        "{\"id\":\"c1\",\"function\":{\"name\":\"w.get\",\"arguments\":\"{\\\"b\\\": [1, 2.0], "
        "\\\"a\\\": true}\"}},{\"id\":\"c2\",\"function\":{\"name\":\"f\",\"arguments\":{}}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"zz\",\"content\":null}],"
        "\"add_generation_prompt\":false}",
        MIN_HEAD "<|start|>assistant to=w.get<|message|><atem:function_calls>\n<atem:invoke "
                 "name=\"w.get\">\n<atem:parameter name=\"b\">[1, 2.0]</atem:parameter>\n"
                 "<atem:parameter name=\"a\">true</atem:parameter>\n</atem:invoke>\n"
                 "</atem:function_calls><|eom|><|start|>assistant to=f<|message|>"
                 "<atem:function_calls>\n<atem:invoke name=\"f\">\n</atem:invoke>\n"
                 "</atem:function_calls><|eot|><|start|>tool w.get<|message|><tool_output "
                 "name=\"w.get\">\nok\n</tool_output><|eot|><|start|>tool zz<|message|>"
                 "<tool_output name=\"zz\">\n\n</tool_output><|eot|>"));
}

TEST(test_tojson_python_semantics)
{
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"[1.0, 100.0, 1e16, 1e15, 0.0001, 0.00001, -0.0, 2.5e-7, 3.14159, 1e22]",
         "[1.0, 100.0, 1e+16, 1000000000000000.0, 0.0001, 1e-05, -0.0, 2.5e-07, 3.14159, 1e+22]"},
        {"{\"z\": {}, \"a\": [], \"m\": [null, true, false, -7]}",
         "{\"z\": {}, \"a\": [], \"m\": [null, true, false, -7]}"},
        {"\"<&>'\\u00e9\\u0001\\n\\t\\\"\\\\/\\u007f\"",
         "\"<&>'\xc3\xa9\\u0001\\n\\t\\\"\\\\/\x7f\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *j = json_loads(cases[i].in, JSON_DECODE_ANY, NULL);
        REQUIRE(j);
        size_t len = 0;
        char *s = gl_chat_tojson(j, &len);
        CHECKF(s && !strcmp(s, cases[i].want) && len == strlen(s), "case %zu: got [%s]", i,
               s ? s : "(null)");
        gl_free(s);
        json_decref(j);
    }
}

TEST(test_errors_name_the_index)
{
    CHECK(fails_with("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{\"role\":\"user\"},"
                     "{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\","
                     "\"arguments\":\"{\\\"a\\\": \"}}]}]}",
                     "messages[2].tool_calls[0].function.arguments: invalid JSON"));
    CHECK(fails_with("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
                     "{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
                     "messages[0].tool_calls[0].function.arguments: must be a JSON object"));
    CHECK(fails_with("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"},\"hello\"]}",
                     "messages[1]: must be an object"));
    CHECK(fails_with("{\"messages\":[{\"content\":\"x\"}]}", "messages[0]: missing string"));
    CHECK(fails_with("{\"messages\":[{\"role\":7}]}", "messages[0]: missing string"));
    CHECK(fails_with("{\"messages\":{}}", "\"messages\" must be an array"));
    CHECK(
        fails_with("{\"messages\":[{\"role\":\"user\",\"content\":true}]}", "messages[0].content"));
    // A function without description (openai's zodFunction) renders it null, as vLLM does.
    CHECK(fails_with("{\"messages\":[],\"tools\":[{\"name\":7}]}", "tools[0]"));
    CHECK(fails_with("{\"messages\":[{\"role\":\"assistant\",\"content\":[]}],"
                     "\"continue_final_message\":true,\"add_generation_prompt\":false}",
                     "no text to continue"));
    CHECK(fails_with("{\"messages\":[],\"tools\":[{\"function\":{\"description\":\"\"}}]}",
                     "tools[0]"));
    CHECK(fails_with("{\"messages\":[],\"chat_template_kwargs\":{\"current_date\":5}}",
                     "current_date"));
    CHECK(fails_with("{\"messages\":[{\"role\":\"tool\",\"name\":[1]}]}", "messages[0]"));
}

TEST(test_dropped_roles_and_empty)
{
    // developer is dropped but still separates a tool call from the next assistant message, so
    // the call ends in eot (it would be eom directly before an assistant message).
    static const char *const mid[2] = {"", "{\"role\":\"developer\",\"content\":\"d\"},"};
    for (int k = 0; k < 2; k++) {
        char req[1024], want[1024];
        snprintf(req, sizeof req,
                 "{\"messages\":[" MIN_SYS "{\"role\":\"assistant\",\"tool_calls\":[{"
                 "\"function\":{\"name\":\"f\",\"arguments\":{\"x\":\"1\"}}}]},%s"
                 "{\"role\":\"assistant\",\"content\":[{\"type\":\"image_url\"},{\"type\":"
                 "\"video\"},{\"type\":\"text\",\"text\":\"t\"}]}]}",
                 mid[k]);
        snprintf(want, sizeof want,
                 MIN_HEAD "<|start|>assistant to=f<|message|><atem:function_calls>\n<atem:invoke "
                          "name=\"f\">\n<atem:parameter name=\"x\">1</atem:parameter>\n"
                          "</atem:invoke>\n</atem:function_calls>%s<|start|>assistant to=user"
                          "<|message|><|patch|><|video|>t<|eot|><|start|>assistant",
                 k ? "<|eot|>" : "<|eom|>");
        CHECKF(renders_to(req, want), "developer between: %d", k);
    }
    struct gl_err err = {0};
    gl_status st;
    char *out = render("{\"messages\":[]}", &err, &st);
    CHECK(out && strstr(out, "Reasoning strength: high.") && strstr(out, "<|start|>assistant"));
    gl_free(out);
}

int main(void)
{
    RUN_TESTS(test_golden_no_tools_medium_date, test_golden_default_high,
              test_effort_mapping_and_system_rewrite, test_adjacent_assistants_and_tool_names,
              test_tojson_python_semantics, test_errors_name_the_index,
              test_dropped_roles_and_empty);
}
