"""Token-for-token equality with HF tokenizers (the Rust library, through
@anush008/tokenizers) on tests/tokenize/corpus for the Llama 3, Qwen 3 and Llama 2
tokenizer.json files, with and without special tokens, plus Decode round trips.
The reference is HF tokenizers itself, never our own earlier output."""
import json
import random
import subprocess
import unicodedata

import pytest

from conftest import CORPUS, TOKENIZERS, run_ours, run_reference

pytestmark = pytest.mark.usefixtures("hf_reference")

# What each tokenizer's normalizer does to text that decoding cannot undo.
NORMALIZE = {"llama3": lambda s: s, "qwen3": lambda s: unicodedata.normalize("NFC", s),
             "llama2": lambda s: s}
# Llama 2's Prepend("▁") normalizer runs on each piece between special tokens, so a text
# holding special-token strings decodes with extra spaces (as HF's does): no round trip.
LLAMA2_SPECIALS = ("<s>", "</s>", "<unk>")


def first_mismatch(texts, ours, ref, key_ours, key_ref):
    bad = [i for i in range(len(texts)) if ours[i][key_ours] != ref[i][key_ref]]
    if not bad:
        return None
    i = bad[0]
    return (f"{len(bad)} of {len(texts)} documents differ; first: #{i} {texts[i][:120]!r}\n"
            f"  ours: {ours[i][key_ours]!s:.400}\n  HF:   {ref[i][key_ref]!s:.400}")


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_ids_equal_hf_without_special_tokens(name, encode_tool, corpus_texts, reference):
    ref = reference(name)
    ours = run_ours(encode_tool, TOKENIZERS[name], CORPUS, "--decode")
    assert len(ours) == len(ref) == len(corpus_texts) >= 300
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids") is None


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_ids_equal_hf_with_tokenizer_default_special_tokens(name, encode_tool, corpus_texts,
                                                             reference):
    ref = reference(name)
    ours = run_ours(encode_tool, TOKENIZERS[name], CORPUS, "--special_tokens",
                    "tokenizer_default")
    assert len(ours) == len(ref)
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids_special") is None


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_decode_equals_hf_and_round_trips(name, encode_tool, corpus_texts, reference):
    ref = reference(name)
    ours = run_ours(encode_tool, TOKENIZERS[name], CORPUS, "--decode")
    assert first_mismatch(corpus_texts, ours, ref, "decoded", "decoded") is None
    checked = 0
    for text, o in zip(corpus_texts, ours):
        if name == "llama2" and any(s in text for s in LLAMA2_SPECIALS):
            continue
        assert o["decoded"] == NORMALIZE[name](text), text[:120]
        checked += 1
    assert checked >= 300


@pytest.mark.parametrize("name", ["llama3", "qwen3"])
def test_split_special_tokens_matches_hf_without_special_added_tokens(
        name, encode_tool, corpus_texts, tmp_path):
    # HF's split_special_tokens skips special added tokens when matching; its reference
    # here is the same tokenizer.json whose special added tokens can never match (content
    # renamed to a string absent from the corpus; removing them would renumber the
    # others). None overlaps a non-special one, so matching is otherwise unchanged.
    spec = json.loads(TOKENIZERS[name].read_text(encoding="utf-8"))
    for i, t in enumerate(spec["added_tokens"]):
        if t["special"]:
            t["content"] = f"\u0001never-in-text-{i}\u0001"
    plain = tmp_path / "tokenizer.json"
    plain.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    ref = run_reference(plain, CORPUS)
    ours = run_ours(encode_tool, TOKENIZERS[name], CORPUS, "--split_special_tokens")
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids") is None
    # And the specials really were split: some document held one.
    normal = run_ours(encode_tool, TOKENIZERS[name], CORPUS)
    assert any(a["ids"] != b["ids"] for a, b in zip(ours, normal))


O200K = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
         r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+"
         r"[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
         r"[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@pytest.mark.parametrize("variant", ["o200k_split", "gpt2_byte_level_regex",
                                     "gpt2_prefix_space", "cl100k_split"])
def test_other_known_pre_tokenizers_match_hf(variant, encode_tool, corpus_texts, tmp_path):
    # The GPT-4o (o200k) and GPT-2 scanners checked the same way on Qwen 3's vocabulary:
    # HF runs the real regex (Oniguruma), we run the hand-written scanner.
    spec = json.loads(TOKENIZERS["qwen3"].read_text(encoding="utf-8"))
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    if variant == "o200k_split":
        split["pattern"]["Regex"] = O200K
    elif variant == "cl100k_split":
        split["pattern"]["Regex"] = split["pattern"]["Regex"].replace(r"\p{N}|", r"\p{N}{1,3}|")
    else:
        byte_level["use_regex"] = True
        byte_level["add_prefix_space"] = variant == "gpt2_prefix_space"
        spec["pre_tokenizer"] = byte_level
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    ref = run_reference(path, CORPUS)
    ours = run_ours(encode_tool, path, CORPUS)
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids") is None


def random_documents(n, seed):
    """Short random mixtures of the characters the regexes and added tokens care about:
    case-folded contraction letters, whitespace kinds, marks, emoji parts, specials."""
    rng = random.Random(seed)
    pool = (list("aAbBsStTlLdDmMrReEvV'’ \t\n\r0123456789.,;:!?/-_()[]{}<>|\"#@$%^&*+=~`\\")
            + list("éÉßſKİıçÇñ日本語中文한국어مرحبانमस्तेПриветΣσς😀👍🏽‍❤️🇺🇸½Ⅻ١٢")
            + ["\u0301", "\u0308", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b", "\ufeff",
               "<s>", "</s>", "<unk>", "<|endoftext|>", "<|im_end|>", "<think>",
               "<|begin_of_text|>", "  ", "\r\n"])
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 40))) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_random_mixtures_match_hf(name, encode_tool, tmp_path):
    texts = random_documents(1500, seed=14)
    docs = tmp_path / "random.jsonl"
    docs.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                    encoding="utf-8")
    ref = run_reference(TOKENIZERS[name], docs)
    ours = run_ours(encode_tool, TOKENIZERS[name], docs, "--decode")
    special = run_ours(encode_tool, TOKENIZERS[name], docs, "--special_tokens",
                       "tokenizer_default")
    assert len(ours) == len(special) == len(ref) == len(texts)
    assert first_mismatch(texts, ours, ref, "ids", "ids") is None
    assert first_mismatch(texts, special, ref, "ids", "ids_special") is None
    assert first_mismatch(texts, ours, ref, "decoded", "decoded") is None


@pytest.mark.parametrize("variant", ["metaspace_first", "metaspace_always_split",
                                     "metaspace_never", "nfkc"])
def test_metaspace_and_nfkc_match_hf(variant, encode_tool, corpus_texts, tmp_path):
    # Metaspace (newer Llama/Mistral tokenizer.json files) on Llama 2's vocabulary instead of
    # its Prepend+Replace normalizer; NFKC on Qwen 3's instead of NFC.
    if variant == "nfkc":
        spec = json.loads(TOKENIZERS["qwen3"].read_text(encoding="utf-8"))
        spec["normalizer"] = {"type": "NFKC"}
    else:
        spec = json.loads(TOKENIZERS["llama2"].read_text(encoding="utf-8"))
        spec["normalizer"] = None
        scheme = variant.split("_")[1]
        spec["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581",
                                 "prepend_scheme": scheme, "split": variant.endswith("split")}
        spec["decoder"] = {"type": "Metaspace", "replacement": "\u2581",
                           "prepend_scheme": scheme, "split": variant.endswith("split")}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    ref = run_reference(path, CORPUS)
    ours = run_ours(encode_tool, path, CORPUS, "--decode")
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids") is None
    assert first_mismatch(corpus_texts, ours, ref, "decoded", "decoded") is None


def window_edge_documents(n, seed):
    """Long documents (hundreds of characters) of what window edges could split wrongly:
    whitespace, tab and newline runs, digit runs, CJK, emoji ZWJ sequences and skin tones,
    contractions in every case ('s right at an edge), marks, and added tokens."""
    rng = random.Random(seed)
    parts = [" ", "   ", " " * 40, "\t", "\t\t\t\t", "\n", "\n\n\n", "\r\n", " \n ", "\u3000",
             "word", " word", "CamelCase", "it", "'s", "'S", "'LL", "'ve", "'", "\u017f", "don't",
             "7", "42", "1234567890123", "\u0661\u0662\u0663", "\u65e5\u672c\u8a9e\u306e\u6587",
             "\u4e2d\u6587\u5b57", "\ud55c\uad6d\uc5b4", "\u0645\u0631\u062d\u0628\u0627",
             "\u0928\u092e\u0938\u094d\u0924\u0947", "e\u0301", "\u0308",
             "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F44D\U0001F3FD",
             "\U0001F1FA\U0001F1F8", ".", "!!", "...", "/", "(", ")", "\u2581",
             "<s>", "</s>", "<|endoftext|>", "<|im_end|>", "<think>", "<|begin_of_text|>"]
    return ["".join(rng.choice(parts) for _ in range(rng.randint(20, 200))) for _ in range(n)]


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_small_windows_match_hf_across_window_edges(name, encode_tool, corpus_texts, tmp_path):
    # A huge document is normalized, pre-tokenized and (without a pre-tokenizer) cut for BPE
    # a window at a time; with a window of a few characters every document here crosses
    # many edges, and the ids must still be HF's.
    texts = window_edge_documents(300, seed=15) + corpus_texts
    docs = tmp_path / "edges.jsonl"
    docs.write_text("".join(json.dumps({"text": t}, ensure_ascii=False) + "\n" for t in texts),
                    encoding="utf-8")
    ref = run_reference(TOKENIZERS[name], docs)
    for window in ("1", "7", "64"):
        ours = run_ours(encode_tool, TOKENIZERS[name], docs, "--window", window)
        assert len(ours) == len(ref) == len(texts)
        assert first_mismatch(texts, ours, ref, "ids", "ids") is None, f"window {window}"


def test_a_word_over_max_unsplit_bytes_is_refused_naming_the_limit(encode_tool, tmp_path):
    docs = tmp_path / "long_word.jsonl"
    docs.write_text(json.dumps({"text": "x" * 5000}) + "\n", encoding="utf-8")
    out = subprocess.run([str(encode_tool), "--tokenizer", str(TOKENIZERS["llama3"]),
                          "--max_unsplit_bytes", "1000", "--window", "100"],
                         stdin=docs.open("rb"), capture_output=True)
    assert out.returncode != 0
    assert "RESOURCE_EXHAUSTED" in out.stderr.decode() and "max_unsplit_bytes" in out.stderr.decode()
