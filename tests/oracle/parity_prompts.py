# parity_prompts.py: the fixed prompt battery of check_parity.sh (imported by parity_run.py).
# Mark-free text only (no \p{M}: no combining accents, Indic vowel signs, Arabic harakat or emoji
# variation selectors): llama.cpp's llama4 pre-tokenizer deliberately differs from tiktoken next to
# combining marks (oracles.md §3), and this battery checks exact token equality with llama.cpp.
# Several prompts are longer than the tiny model's 8-token window; the longest is ~100 tokens.

PROMPTS = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog, then runs far away into the dark forest.",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "Le petit garçon a mangé une pomme très sucrée près de la fenêtre.",
    "Привет, мир! Как у тебя дела сегодня?",
    "今日はとても良い天気ですね。散歩に行きましょう。",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "Die Straße war nass, aber wir gingen trotzdem zum Bäcker um die Ecke.",
    "12345 + 67890 = 80235; 3.14159 * 2 = 6.28318",
    "人工智能正在改变世界，但我们仍然需要仔细思考它的影响。",
    "SELECT name, COUNT(*) FROM users WHERE age > 30 GROUP BY name ORDER BY 2 DESC;",
    "Ελληνικά: η γρήγορη καφέ αλεπού "
    "πηδάει πάνω από τον τεμπέλη σκύλο.",
    "안녕하세요! 오늘 회의는 오후 세 시에 시작합니다.",
    "{\"name\": \"glint\", \"version\": 1, \"tags\": [\"fast\", \"small\"], \"ok\": true}",
    "In the beginning the Universe was created. This has made a lot of people very angry and "
    "been widely regarded as a bad move. Many races believe that it was created by some sort of "
    "God, though the Jatravartid people of Viltvodle VI believe that the entire Universe was in "
    "fact sneezed out of the nose of a being called the Great Green Arkleseizure.",
    "fn main() {\n    let v: Vec<u32> = (1..=10).map(|x| x * x).collect();\n"
    "    println!(\"{:?}\", v);\n}\n"
    "// 日本語のコメント and an English one; ¿Qué tal? ¡Muy bien!",
]

# Prompts whose all-position logits are compared (indices into PROMPTS): one shorter than the
# window, one a little over it, and for F32 one several windows long. Each logits position costs
# llama.cpp ~0.2-0.3 s (node-llama-cpp hands back a sorted 202k-entry Map), hence the short list.
LOGIT_PROMPTS = {"F32": [0, 1, 15], "default": [0, 1]}
