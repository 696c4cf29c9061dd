"""Writes corpus.jsonl: the multilingual documents tests/tokenize compares token for token.

Deterministic (no randomness beyond a fixed-seed generator): rerun it and commit the output
when adding cases. Each line is {"text": ...}. Run: /usr/bin/python3 make_corpus.py
"""
import json
import random
import unicodedata
from pathlib import Path

SEEDS = [
    # English prose, punctuation, quotes
    "The quick brown fox jumps over the lazy dog.",
    "Hello, world! How are you doing today? I'm fine -- thanks for asking...",
    "\"Quoted text,\" she said. 'Single quotes' and `backticks` and «guillemets» and “curly”.",
    "Mr. O'Neil's dog barked at 5:30 a.m.; it wasn't happy (at all) [really] {truly}.",
    "URLs: https://example.com/path?q=1&r=two#frag and mailto:someone@example.org",
    "Price: $1,234,567.89 — about €1.1M or ¥170,000,000; 50% off! #deal @shop",
    # Contractions
    "I'd've thought they'd be here; we'll see, you're right, it's theirs, she's gone.",
    # CJK
    "日本語のテキストです。東京は日本の首都です。ひらがな、カタカナ、漢字を混ぜて書きます。",
    "中文文本：我们今天去公园散步，天气很好。繁體中文也應該正確處理。",
    "한국어 텍스트입니다. 서울은 대한민국의 수도입니다.",
    "全角文字：ＡＢＣ１２３！？　全角スペースも含む。",
    # Arabic, Hebrew, Persian (RTL)
    "مرحبا بالعالم! هذا نص عربي مع أرقام ١٢٣٤٥ وعلامات ترقيم؟",
    "שלום עולם, זהו טקסט בעברית עם ניקוד: בְּרֵאשִׁית",
    "سلام دنیا، این یک متن فارسی است با اعداد ۱۲۳۴۵۶.",
    # Indic
    "नमस्ते दुनिया! यह हिंदी में एक वाक्य है। संख्याएँ: १२३४५",
    "বাংলা ভাষায় একটি বাক্য। தமிழ் மொழியில் ஒரு வாக்கியம். తెలుగు వాక్యం.",
    "ไทยไม่มีช่องว่างระหว่างคำ ภาษาไทยเขียนติดกัน",
    # Cyrillic, Greek, others
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Ελληνικά: Καλημέρα κόσμε! Γειά σου.",
    "Українська: Ґанок, їжак, є; Беларуская: ў; Српски: Ђорђе.",
    "Tiếng Việt có dấu: Xin chào thế giới, tôi đang học lập trình.",
    "Türkçe: İstanbul'da ılık bir gün; Ş ğ ü ö ç İ ı.",
    "Deutsch: Straße, Größe, Übermäßig; Français: œuvre, garçon, naïve, Noël.",
    # Emoji: ZWJ sequences, skin tones, flags, keycaps, variation selectors
    "Family: 👨‍👩‍👧‍👦 couple: 👩‍❤️‍👨 technologist: 🧑🏽‍💻 rainbow flag: 🏳️‍🌈",
    "Thumbs: 👍 👍🏻 👍🏼 👍🏽 👍🏾 👍🏿 waving: 👋🏿👋🏻",
    "Flags: 🇺🇸🇯🇵🇩🇪🇫🇷 keycaps: 1️⃣ #️⃣ *️⃣ hearts: ❤️ ♥ 💔",
    "Emoji only: 😀😃😄😁😆😅🤣😂🙂🙃😉😊😇",
    # Code
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"hi %d\\n\", 42);\n\treturn 0;\n}\n",
    "const f = (a, b) => { return a ?? b; }; // arrow\nlet x = [1, 2, 3].map(v => v ** 2);",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<html>\n  <body class=\"main\">\n    <p>Hi &amp; bye</p>\n  </body>\n</html>",
    "fn main() {\n    let v: Vec<u32> = (0..10).filter(|x| x % 2 == 0).collect();\n    println!(\"{:?}\", v);\n}",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "    indented with spaces\n\tindented with tab\n\t\t two tabs\n        eight spaces",
    # Whitespace runs, tabs, CRLF, newlines
    "word    word\t\tword \t \tword\n\n\nword\r\nword\r\n\r\nword",
    "trailing spaces   \nleading\n   spaces\n\n\n\n",
    "\n\nstarts with newlines",
    "line1\rline2\rline3 (bare CR)",
    "nbsp\u00a0here\u2003em-space\u2009thin\u3000ideographic\u200bzero-width",
    "\u2028line separator\u2029paragraph separator\u0085next line",
    # Numbers
    "1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890",
    "3.14159265358979323846264338327950288419716939937510582097494459",
    "Phone: +1 (555) 123-4567, ISBN 978-3-16-148410-0, 2024-01-31T12:34:56Z",
    "Fractions ½ ¼ ¾, superscripts x² y³, roman Ⅻ, circled ①②③, Arabic-Indic ٣٤٥",
    # Decomposed accents (NFC/NFD differences)
    unicodedata.normalize("NFD", "café naïve résumé Ångström Pokémon São Paulo"),
    "e\u0301 a\u0300 o\u0302 n\u0303 u\u0308 c\u0327 — combining marks after base letters",
    "ﬁ ﬂ ﬀ ligatures, ㎞ ㎏ ℃ ™ ℡ compatibility characters, Ｆｕｌｌｗｉｄｔｈ",
    "Hangul jamo: \u1100\u1161\u11a8 vs precomposed 각",
    # Long words
    "Pneumonoultramicroscopicsilicovolcanoconiosis and Donaudampfschifffahrtsgesellschaftskapitän",
    "a" * 300,
    "ab" * 200 + " " + "xyz" * 150,
    "😀" * 60,
    "日本" * 120,
    "-" * 100 + "=" * 80 + "_" * 50,
    # Special-token strings inside text
    "Start <|begin_of_text|> middle <|end_of_text|> end",
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>",
    "<s>[INST] Tell me a joke [/INST] Why did the chicken</s>",
    "Tags: <think>reasoning</think> <tool_call>{}</tool_call> <|endoftext|><|endoftext|>",
    "Partial: <|begin_of_tex <|im_sta </ s> <s <|endoftext|",
    "  <s>  spaced  </s>  ",
    # Mixed scripts
    "Mixed: English日本語Русский العربية हिन्दी 한국어 in one line!",
    "CamelCaseIdentifier snake_case_name kebab-case-name SCREAMING_CASE mixedCASEWord",
    "ALLCAPS SENTENCE WITH I'M AND YOU'RE AND IT'S.",
    "Control chars: \u0001\u0002\u001f and DEL \u007f and BOM \ufeff inside.",
    "Private use \ue000\uf8ff and astral math 𝐀𝐁𝐂 𝕏 and CJK ext 𠀀𠀁",
]

CONTRACTION_BASES = ["s", "t", "re", "ve", "m", "ll", "d"]


def case_variants(word):
    variants = {word.lower(), word.upper(), word.capitalize()}
    if len(word) == 2:
        variants.add(word[0].lower() + word[1].upper())
    return sorted(variants)


def contraction_docs():
    docs = []
    for base in CONTRACTION_BASES:
        for v in case_variants(base):
            docs.append(f"it'{v} he'{v} THEY'{v} x'{v}y '{v} '{v}'{v} 5'{v} '{v}")
    docs.append("It's I'M You'RE We'Ve She'Ll He'D Don'T isn'T SHE'S they'LL")
    docs.append("rock 'n' roll, 'tis, 'twas, y'all, ma'am, o'clock, '90s")
    # U+017F LONG S folds to 's' under the regexes' (?i:), unlike K (Kelvin) for 'k'.
    docs.append("it'\u017f x'\u017ft THEY'\u017f '\u017f'\u017f 'K x'\u212aa")
    return docs


def whitespace_docs():
    docs = []
    for n in range(1, 9):
        docs.append("a" + " " * n + "b")
        docs.append(" " * n)
        docs.append("x" + "\t" * n + "y")
        docs.append("p" + "\n" * n + "q")
        docs.append("r" + "\r\n" * n + "s")
        docs.append("u" + " \n" * n + "v" + " " * n)
    docs += ["", " ", "\t", "\n", "\r\n", " \t\n\r ", "\u00a0", "\u3000\u3000"]
    return docs


def number_docs():
    docs = []
    for n in range(1, 25):
        docs.append("".join(str((i * 7 + n) % 10) for i in range(n)))
    docs.append("v1.2.3 x86_64 0x7fffffff 1e-9 -42 +17 3/4 1,000,000 ٠١٢٣٤٥٦٧٨٩")
    return docs


def combos(rng, n):
    pieces = [s for s in SEEDS if len(s) < 200]
    docs = []
    for _ in range(n):
        k = rng.randint(2, 5)
        sep = rng.choice([" ", "\n", "\n\n", "\t", "  ", "", "\r\n"])
        docs.append(sep.join(rng.choice(pieces) for _ in range(k)))
    return docs


def main():
    rng = random.Random(14)
    docs = list(SEEDS) + contraction_docs() + whitespace_docs() + number_docs()
    docs += combos(rng, 200)
    # One long document (~40 KB) mixing everything.
    docs.append("\n\n".join(SEEDS * 4))
    out = Path(__file__).with_name("corpus.jsonl")
    with out.open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")
    print(f"wrote {len(docs)} documents to {out}")


if __name__ == "__main__":
    main()
