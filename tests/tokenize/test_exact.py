"""Token-for-token equality with HF tokenizers (the Rust library, through
@anush008/tokenizers) on tests/tokenize/corpus for the Llama 3, Qwen 3 and Llama 2
tokenizer.json files, with and without special tokens, plus Decode round trips.
The reference is HF tokenizers itself, never our own earlier output."""
import json
import random
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
