# Generates tests/oracle/chat_corpus/*.json: `/usr/bin/python3 tests/oracle/chat_corpus_gen.py tests/oracle/chat_corpus` (the JSON files are committed).
import json, os, sys
out = sys.argv[1]
C = {}
def U(t): return {"role": "user", "content": t}
def A(t, **kw): d = {"role": "assistant", "content": t}; d.update(kw); return d
def S(t): return {"role": "system", "content": t}
def TC(name, args, id=None):
    d = {"type": "function", "function": {"name": name, "arguments": args}}
    if id is not None: d["id"] = id
    return d
def T(content, **kw): d = {"role": "tool", "content": content}; d.update(kw); return d
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
NS_TOOLS = [
    {"type": "function", "function": {"name": "weather.get", "description": "Current weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "weather.forecast", "description": "Forecast",
        "parameters": {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1}}}}},
    {"type": "function", "function": {"name": "search.web", "description": "Web search",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
]
DATE = {"current_date": "2026-07-29"}
def add(name, messages, **kw):
    d = {"messages": messages}; d.update(kw); C[name] = d

add("no_system_basic", [U("hi")])
add("no_system_date", [U("What is 17 * 23?")], chat_template_kwargs={"current_date": "2026-07-29", "reasoning_strength": "medium"})
add("no_system_cutoff", [U("hi")], chat_template_kwargs={"knowledge_cutoff": "2025-12-31", "current_date": "2026-01-02"})
add("no_system_empty_kwargs", [U("hi")], chat_template_kwargs={"knowledge_cutoff": "", "current_date": None})
add("system_plain", [S("You are terse."), U("hi")])
add("system_effort_line", [S("You are terse.\nReasoning effort: low"), U("hi")])
add("system_effort_casings", [S("Reasoning Effort: high. reasoning effort. REASONING EFFORT: MAX"), U("hi")])
add("system_strength_present", [S("Be brief. reasoning strength: max."), U("hi")])
add("system_strength_mixedcase", [S("ReAsOnInG StReNgTh = low"), U("hi")])
add("system_effortless", [S("Reasoning effortless mode"), U("hi")])
add("system_with_tools", [S("You call tools."), U("weather in Paris?")], tools=[WEATHER])
add("system_twice", [S("first"), U("hi"), S("second, Reasoning effort: xhigh"), U("again")])
add("system_parts", [{"role": "system", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Reasoning effort: medium"}]}, U("hi")])
add("system_date_ignored", [S("sys"), U("hi")], chat_template_kwargs=DATE)
add("system_only", [S("Only a system prompt.")])
add("tools_no_namespace", [U("weather in Paris?")], tools=[WEATHER], chat_template_kwargs=DATE)
add("tools_namespaces", [U("plan a trip")], tools=NS_TOOLS)
add("tools_namespace_desc", [U("plan a trip")], tools=NS_TOOLS, chat_template_kwargs={"tool_namespace_descriptions": {"weather": "Weather service", "search": "Search the web \"quoted\""}})
add("tools_namespace_desc_partial", [U("plan")], tools=NS_TOOLS + [WEATHER], chat_template_kwargs={"tool_namespace_descriptions": {"search": "S"}})
add("tools_namespace_desc_object", [U("plan")], tools=NS_TOOLS, chat_template_kwargs={"tool_namespace_descriptions": {"weather": {"owner": "met", "v": 2}}})
add("tools_bare_functions", [U("hi")], tools=[WEATHER["function"], {"name": "calc.add", "description": "Add", "parameters": {"type": "object"}}])
add("tools_mixed_shapes", [U("hi")], tools=[NS_TOOLS[0]["function"], WEATHER, NS_TOOLS[2]])
add("tools_odd_schemas", [U("hi")], tools=[
    {"type": "function", "function": {"name": "noop", "description": None, "parameters": {}}},
    {"type": "function", "function": {"name": "uni.fn", "description": "Ünïcödé — 天気 🌦 <b>&amp;</b> 'q' \"dq\" \\ \t tab\nnl",
        "parameters": {"type": "object", "properties": {"x": {"type": "number", "default": 1.5, "enum": [1, 2.0, -3e-7, 1e16, True, None]}, "y": {"type": "array", "items": {}}}}}},
    {"type": "function", "function": {"name": "a.b.c", "description": "", "parameters": {"z": 1, "a": 2, "m": [], "e": {}}}},
])
add("tools_empty_list", [U("hi")], tools=[])
add("tools_null", [U("hi")], tools=None)
add("multi_turn_reasoning_tool", [
    U("What's the weather in Paris?"),
    A(None, reasoning_content="I need the weather tool.", tool_calls=[TC("get_weather", {"city": "Paris"}, "call_1")]),
    T("18C, cloudy", tool_call_id="call_1"),
    A("It is 18 °C and cloudy in Paris.", reasoning_content="Summarise."),
    U("Thanks! And tomorrow?")], tools=[WEATHER], chat_template_kwargs=DATE)
add("reasoning_field", [U("q"), A("a", reasoning="thinking hard"), U("q2")])
add("reasoning_both_fields", [U("q"), A("a", reasoning="ignored", reasoning_content="used"), U("q2")])
add("reasoning_empty", [U("q"), A("a", reasoning_content=""), U("q2")])
add("parallel_calls_2", [U("weather in Paris and Rome"),
    A(None, tool_calls=[TC("get_weather", {"city": "Paris"}, "c1"), TC("get_weather", {"city": "Rome"}, "c2")]),
    T("20C", tool_call_id="c1"), T("25C", tool_call_id="c2")], tools=[WEATHER])
add("parallel_calls_3_ns", [U("plan"),
    A("ignored content", reasoning_content="three calls", tool_calls=[TC("weather.get", {"city": "Oslo"}, "a"), TC("weather.forecast", {"days": 3}, "b"), TC("search.web", {"q": "Oslo hotels"}, "c")]),
    T("cold", tool_call_id="a"), T("snow", tool_call_id="b"), T("list", tool_call_id="c"), A("Done.")], tools=NS_TOOLS)
add("adjacent_assistants", [U("hi"), A("one"), A("two"), A("three"), U("x")])
add("adjacent_assistant_tool_then_text", [U("hi"), A(None, tool_calls=[TC("get_weather", {"city": "Paris"}, "c1")]), A("follow-up")], tools=[WEATHER])
add("adjacent_users", [U("one"), U("two")])
add("adjacent_tools_named", [U("hi"), A(None, tool_calls=[TC("get_weather", {"city": "A"}, "x")]), T("r1", name="get_weather"), T("r2", name="other.fn")], tools=[WEATHER])
add("tool_no_name_no_id", [U("hi"), T("orphan")])
add("tool_id_unmatched", [U("hi"), T("orphan", tool_call_id="call_zzz")])
add("tool_id_matches_later", [U("hi"), T("early", tool_call_id="k"), A(None, tool_calls=[TC("search.web", {"q": "x"}, "k")])], tools=NS_TOOLS)
add("tool_id_dup_last_wins", [U("hi"), A(None, tool_calls=[TC("weather.get", {}, "d")]), T("r", tool_call_id="d"), A(None, tool_calls=[TC("search.web", {}, "d")])], tools=NS_TOOLS)
add("tool_call_without_id", [U("hi"), A(None, tool_calls=[TC("get_weather", {"city": "P"})]), T("r", tool_call_id="c9")], tools=[WEATHER])
add("tool_content_parts", [U("hi"), T([{"type": "text", "text": "line1\n"}, {"type": "text", "text": "line2"}], name="get_weather")])
add("image_parts", [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}, {"type": "text", "text": "What is this?"}]}])
add("image_types", [{"role": "user", "content": [{"type": "image"}, {"type": "input_image", "image_url": "x"}, {"type": "text", "text": " two images"}]}])
add("video_parts", [{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "file:///v.mp4"}}, {"type": "video"}, {"type": "text", "text": "Describe."}]}])
add("mixed_parts_unknown", [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}, {"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "u"}}, {"type": "file"}, {"type": "input_text", "text": "b"}, "bare string part", {"text": "no type"}, {"type": "text"}]}])
add("unicode", [S("Système: répondez en français. 日本語もOK. Emoji 🎉 and RTL שלום and combining é"), U("¿Qué tal? 你好 👋🏽 \u2028 sep"), A("Très bien ✓")])
add("empty_content", [S(""), U(""), A(""), U("")])
add("null_content", [U(None), A(None), U("x")])
add("missing_content", [{"role": "user"}, {"role": "assistant"}])
for lvl in ["low", "medium", "high", "xhigh", "none", "max"]:
    add("effort_kwarg_" + lvl, [U("hi")], chat_template_kwargs={"reasoning_strength": lvl, "current_date": "2026-03-01"})
for lvl in ["low", "medium", "high", "xhigh", "none", "max"]:
    add("reasoning_effort_" + lvl, [S("sys prompt"), U("hi")], reasoning_effort=lvl)
add("kwarg_overrides_effort", [U("hi")], reasoning_effort="low", chat_template_kwargs={"reasoning_strength": "xhigh"})
add("kwarg_empty_beats_effort", [U("hi")], reasoning_effort="low", chat_template_kwargs={"reasoning_strength": ""})
add("effort_with_system_line", [S("Reasoning effort: low"), U("hi")], reasoning_effort="max")
add("no_generation_prompt", [U("hi"), A("hello")], add_generation_prompt=False)
add("generation_prompt_explicit", [U("hi")], add_generation_prompt=True)
add("string_arguments", [U("weather"), A(None, tool_calls=[TC("get_weather", "{\"city\": \"Paris\"}", "c1")]), T("sunny", tool_call_id="c1")], tools=[WEATHER])
add("string_arguments_typed", [U("x"), A(None, tool_calls=[TC("calc.run", json.dumps({"obj": {"b": 1, "a": [1, 2, {"c": None}]}, "arr": ["x", "y"], "t": True, "f": False, "n": None, "i": 42, "neg": -7, "fl": 2.5, "one": 1.0, "tiny": 1e-7, "big": 1e22, "s": "multi\nline  \"quoted\" <tag> & 'apos'", "empty": "", "ea": [], "eo": {}}), "c1")])])
add("object_arguments_typed", [U("x"), A(None, tool_calls=[TC("calc.run", {"z": "last first", "obj": {"k": "ü", "nested": {"deep": [[]]}}, "num": 3.14159, "e": 1e-5, "e2": 0.0001, "e3": 1e16, "e4": 1e15})])])
add("empty_arguments", [U("x"), A(None, tool_calls=[TC("noop", {}, "1"), TC("noop", "{}", "2")])])
add("string_arguments_ws", [U("x"), A(None, tool_calls=[TC("f", "  {\n \"a\" : 1 }\n ", "1")])])
add("recipient_custom", [U("x"), A("tool-bound text", recipient="weather.get"), A("to user", recipient="user")])
add("recipient_end_turn", [U("x"), A("a", recipient="weather.get", end_turn=True), A("b", end_turn=False), A("c", recipient="", end_turn=None)])
add("developer_dropped", [{"role": "developer", "content": "Dev instructions"}, U("hi")])
add("developer_between_assistants", [U("hi"), A("one"), {"role": "developer", "content": "d"}, A("two")])
add("unknown_roles", [U("hi"), {"role": "function", "content": "f"}, {"role": "", "content": "e"}, A("ok")])
add("empty_messages", [])
add("special_text_passthrough", [U("literal <|eot|><|start|>assistant to=user<|message|> and <atem:function_calls>")])
add("jinja_like_text", [U("{{ messages }} {% if x %} {# c #}")])
add("content_with_tool_calls_ignored", [U("x"), A("this content is dropped", tool_calls=[TC("get_weather", {"city": "Nice"}, "c")])], tools=[WEATHER])
add("long_conversation", sum([[U("question %d" % i), A("answer %d" % i, reasoning_content=("think %d" % i) if i % 2 else None)] for i in range(10)], []) + [U("last")], chat_template_kwargs={"reasoning_strength": "low"})
add("extra_kwargs_ignored", [U("hi")], chat_template_kwargs={"enable_thinking": False, "foo": 1, "current_date": "2026-12-02"})
add("full_featured", [S("You are Glimmer. Reasoning Effort: medium"), U([{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": "u"}}]),
    A(None, reasoning_content="Need search.", tool_calls=[TC("search.web", "{\"q\": \"cats\", \"n\": 3}", "s1")]),
    T("results...", tool_call_id="s1"), A("Here you go.", reasoning="done"), U("more")], tools=NS_TOOLS,
    chat_template_kwargs={"tool_namespace_descriptions": {"search": "Search"}, "current_date": "2026-02-02"}, reasoning_effort="high")
add("ns_desc_null_no_tools", [U("hi")], chat_template_kwargs={"tool_namespace_descriptions": None})
add("tools_false", [U("hi")], tools=False)
add("tool_empty_name_uses_id", [U("hi"), A(None, tool_calls=[TC("weather.get", {"n": 1}, "q1")]), T("r", name="", tool_call_id="q1")], tools=NS_TOOLS)
add("tool_numeric_id", [U("hi"), A(None, tool_calls=[TC("weather.get", {}, 7)]), T("r", tool_call_id=7)], tools=NS_TOOLS)
add("args_unicode_keys", [U("x"), A(None, tool_calls=[TC("f", {"ключ": "значение", "emoji🎉": ["ü", {"k": "\u0007"}], "lead space": " v "})])])
# error cases: the reference raises; glint must fail too
add("err_bad_string_arguments", [U("x"), A(None, tool_calls=[TC("f", "{\"a\": ", "1")])])
add("err_array_arguments", [U("x"), A(None, tool_calls=[TC("f", "[1, 2]", "1")])])
add("err_missing_arguments", [U("x"), A(None, tool_calls=[{"id": "1", "function": {"name": "f"}}])])
# The SDKs' helpers omit description (openai's zodFunction) and may omit parameters: vLLM renders
# both as null (its request model's None).
# continue_final_message (transformers' rule: cut after the final message's stripped text).
add("continue_final", [U("Say hello"), A("Hello the")], add_generation_prompt=False, continue_final_message=True)
add("continue_final_spaces", [U("hi"), A("  Hello there  ")], add_generation_prompt=False, continue_final_message=True)
add("continue_final_repeated", [U("Hello"), A("Hello")], add_generation_prompt=False, continue_final_message=True)
add("continue_final_reasoning", [U("hi"), A("Answer: ", reasoning_content="think first")], add_generation_prompt=False, continue_final_message=True)
add("continue_final_parts", [U("hi"), {"role": "assistant", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}], add_generation_prompt=False, continue_final_message=True)
add("continue_final_user", [U("finish this sentence: the sea")], add_generation_prompt=False, continue_final_message=True)
add("err_continue_final_no_text", [U("hi"), {"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}], add_generation_prompt=False, continue_final_message=True)
add("tool_no_description", [U("x")], tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}])
add("tool_no_parameters", [U("x")], tools=[{"type": "function", "function": {"name": "ping", "description": "Ping"}}])
add("tool_name_only", [U("x")], tools=[{"type": "function", "function": {"name": "ns.f"}}, WEATHER])
add("tool_zod_function", [U("extract")], tools=[{"type": "function", "function": {"name": "record", "parameters": {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": ["integer", "null"]}}, "required": ["name", "age"], "additionalProperties": False}, "strict": True}}])
add("err_strength_number", [U("x")], chat_template_kwargs={"reasoning_strength": 3})
add("err_content_number", [U(5)])
os.makedirs(out, exist_ok=True)
for k, v in C.items():
    with open(os.path.join(out, k + ".json"), "w", encoding="utf-8") as f:
        json.dump(v, f, ensure_ascii=False, indent=1)
        f.write("\n")
print(len(C), "files")
