"""zephon.Tokenizer (the C ABI's tokenizer, client/c_api.h) against HF tokenizers on the
corpus for Llama 3, Qwen 3 and Llama 2, plus its Python contract: encode_batch order,
decode, BOS/EOS, fingerprints, objects with to_str(), options and errors. The contract
tests use a tiny tokenizer.json written here, so they run without the npm packages."""
import json
import re

import pytest

import zephon
from conftest import TOKENIZERS, skip_without_reference
from test_exact import LLAMA2_SPECIALS, NORMALIZE, first_mismatch

# A tiny Llama 2 style tokenizer.json (tokenizer/tiny_tokenizer_testing.h's, as a dict).
TINY = {
    "version": "1.0",
    "added_tokens": [
        {"id": 0, "content": "<unk>", "special": True, "normalized": False},
        {"id": 1, "content": "<s>", "special": True, "normalized": False},
        {"id": 2, "content": "</s>", "special": True, "normalized": False},
    ],
    "normalizer": {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
    "pre_tokenizer": None,
    "post_processor": {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"},
        {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True,
              "byte_fallback": True,
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5,
                        "\u2581a": 6, "ab": 7, "<0xEF>": 8, "<0xBF>": 9, "<0xBD>": 10},
              "merges": ["\u2581 a", "a b"]},
}


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(TINY), encoding="utf-8")
    return path


# ---- Exactness against HF tokenizers (skipped without the npm packages) ----

@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_encode_equals_hf_on_the_corpus(name, corpus_texts, reference):
    skip_without_reference()
    ref = reference(name)
    tok = zephon.Tokenizer(TOKENIZERS[name])
    ours = [{"ids": tok.encode(t), "ids_special": tok.encode(t, "tokenizer_default")}
            for t in corpus_texts]
    assert len(ours) == len(ref) == len(corpus_texts) >= 300
    assert first_mismatch(corpus_texts, ours, ref, "ids", "ids") is None
    assert first_mismatch(corpus_texts, ours, ref, "ids_special", "ids_special") is None


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_encode_batch_on_two_threads_equals_encode(name, corpus_texts, reference):
    skip_without_reference()
    tok = zephon.Tokenizer(TOKENIZERS[name])
    batch = tok.encode_batch(corpus_texts, num_threads=2)
    assert batch == [tok.encode(t) for t in corpus_texts]
    assert [r["ids"] for r in reference(name)] == batch
    with_eos = tok.encode_batch(corpus_texts, special_tokens="eos", num_threads=2)
    assert with_eos == [ids + [tok.eos_token_id] for ids in batch]


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_decode_equals_hf_and_round_trips(name, corpus_texts, reference):
    skip_without_reference()
    ref = reference(name)
    tok = zephon.Tokenizer(TOKENIZERS[name])
    ours = [{"decoded": tok.decode(r["ids"])} for r in ref]
    assert first_mismatch(corpus_texts, ours, ref, "decoded", "decoded") is None
    checked = 0
    for text in corpus_texts:
        if name == "llama2" and any(s in text for s in LLAMA2_SPECIALS):
            continue
        assert tok.decode(tok.encode(text)) == NORMALIZE[name](text), text[:120]
        checked += 1
    assert checked >= 300


@pytest.mark.parametrize("name,vocab_size,bos,eos", [
    ("llama3", 128256, 128000, 128001),
    ("llama2", 32000, 1, 2),
    # Qwen 3: HF gives it no BOS; "<s>" / "</s>" are ordinary entries of its vocabulary.
    ("qwen3", 151669, None, 151643),
])
def test_vocab_size_bos_eos_and_fingerprint(name, vocab_size, bos, eos):
    skip_without_reference()
    tok = zephon.Tokenizer(TOKENIZERS[name])
    assert (tok.vocab_size, tok.bos_token_id, tok.eos_token_id) == (vocab_size, bos, eos)
    if bos is not None:
        assert tok.encode("hi", "bos_eos")[0] == bos and tok.encode("hi", "bos_eos")[-1] == eos
    assert tok.encode("hi", "eos")[-1] == eos
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", tok.fingerprint)
    assert zephon.Tokenizer(TOKENIZERS[name]).fingerprint == tok.fingerprint


def test_tokenizers_differ_in_fingerprint():
    skip_without_reference()
    prints = {zephon.Tokenizer(p).fingerprint for p in TOKENIZERS.values()}
    assert len(prints) == len(TOKENIZERS)


# ---- The Python contract (tiny tokenizer, no npm needed) ----

def test_encode_modes_decode_and_properties(tiny):
    tok = zephon.Tokenizer(tiny)
    assert tok.encode("a b") == [6, 3, 5]
    assert tok.encode(b"a b") == [6, 3, 5]
    assert tok.encode("a b", special_tokens="bos") == [1, 6, 3, 5]
    assert tok.encode("a b", special_tokens="bos_eos") == [1, 6, 3, 5, 2]
    assert tok.encode("a b", special_tokens="tokenizer_default") == [1, 6, 3, 5]
    assert tok.encode("", special_tokens="eos") == [2]
    assert tok.decode([6, 3, 5]) == "a b"
    assert tok.decode([]) == ""
    assert (tok.vocab_size, tok.bos_token_id, tok.eos_token_id) == (11, 1, 2)
    assert "vocab_size=11" in repr(tok)


def test_invalid_utf8_and_lone_surrogates_become_replacement_characters(tiny):
    tok = zephon.Tokenizer(tiny)
    assert tok.encode(b"a\xff") == tok.encode("a\ufffd")
    assert tok.encode("a\ud800") == tok.encode(b"a\xed\xa0\x80")


def test_encode_batch_keeps_order_for_any_thread_count(tiny):
    tok = zephon.Tokenizer(tiny)
    texts = [("a b " * (i % 9)) + "ab" * (i % 4) for i in range(500)]
    expected = [tok.encode(t, "bos") for t in texts]
    for threads in (1, 2, 3, 0):
        assert tok.encode_batch(texts, special_tokens="bos", num_threads=threads) == expected
    assert tok.encode_batch([]) == []
    assert tok.encode_batch(["", ""], special_tokens="eos") == [[2], [2]]


def test_a_directory_with_tokenizer_config_names_bos_and_eos(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(TINY), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": "a", "eos_token": {"content": "b"}}), encoding="utf-8")
    tok = zephon.Tokenizer(str(tmp_path))
    assert (tok.bos_token_id, tok.eos_token_id) == (4, 5)


def test_options_override_bos_eos_and_split_special_tokens(tiny):
    plain = zephon.Tokenizer(tiny)
    tok = zephon.Tokenizer(tiny, bos_token_id=7, eos_token_id=6, split_special_tokens=True)
    assert (tok.bos_token_id, tok.eos_token_id) == (7, 6)
    assert tok.encode("a", "bos_eos") == [7, 6, 6]
    assert plain.encode("a</s>") == [6, 2]
    assert tok.encode("a</s>") != [6, 2]  # </s> is text here
    assert tok.fingerprint != plain.fingerprint
    with pytest.raises(ValueError, match="bos_token_id must be a token id"):
        zephon.Tokenizer(tiny, bos_token_id=-3)


class ToStr:
    """A `tokenizers.Tokenizer` stand-in."""

    def __init__(self, text):
        self.text = text

    def to_str(self):
        return self.text


class FastTokenizer:
    """A `transformers` fast tokenizer stand-in: backend_tokenizer and its BOS/EOS."""

    def __init__(self, text, bos_token, eos_token):
        self.backend_tokenizer = ToStr(text)
        self.bos_token, self.eos_token = bos_token, eos_token


def test_objects_with_to_str_load_their_json(tiny):
    from_path = zephon.Tokenizer(tiny)
    from_object = zephon.Tokenizer(ToStr(tiny.read_text(encoding="utf-8")))
    assert from_object.encode("a b a", "bos_eos") == from_path.encode("a b a", "bos_eos")
    assert from_object.fingerprint == from_path.fingerprint
    fast = zephon.Tokenizer(FastTokenizer(json.dumps(TINY), bos_token="b", eos_token="ab"))
    assert (fast.bos_token_id, fast.eos_token_id) == (5, 7)
    assert fast.encode("a", "bos_eos") == [5, 6, 7]


def test_real_tokenizer_objects_through_to_str():
    skip_without_reference()
    text = TOKENIZERS["llama3"].read_text(encoding="utf-8")
    tok = zephon.Tokenizer(ToStr(text))
    assert tok.fingerprint == zephon.Tokenizer(TOKENIZERS["llama3"]).fingerprint


def test_errors_name_the_path_the_json_path_and_the_fix(tmp_path, tiny):
    missing = tmp_path / "nope" / "tokenizer.json"
    with pytest.raises(zephon.NotFoundError, match=re.escape(str(missing))) as e:
        zephon.Tokenizer(missing)
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, zephon.ZephonError)

    empty = tmp_path / "empty_model_dir"
    empty.mkdir()
    with pytest.raises(zephon.NotFoundError, match="has no tokenizer.json"):
        zephon.Tokenizer(empty)

    bad = json.loads(json.dumps(TINY))
    bad["model"]["type"] = "WordPiece"
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(zephon.InvalidOptionError) as e:
        zephon.Tokenizer(bad_path)
    assert str(bad_path) in str(e.value) and "model.type" in str(e.value)
    with pytest.raises(ValueError, match="model.type"):
        zephon.Tokenizer(ToStr(json.dumps(bad)))
    with pytest.raises(ValueError):
        zephon.Tokenizer(ToStr("{not json"))

    for url in ("s3://bucket/llama3/tokenizer.json", "s3://bucket/llama3"):
        with pytest.raises(ValueError, match="download the tokenizer first"):
            zephon.Tokenizer(url)
    with pytest.raises(TypeError, match="to_str"):
        zephon.Tokenizer(42)


def test_bad_arguments_raise_value_errors_listing_what_is_valid(tiny):
    tok = zephon.Tokenizer(tiny)
    for call in (lambda: tok.encode("a", "bos+eos"),
                 lambda: tok.encode_batch(["a"], special_tokens="BOS")):
        with pytest.raises(ValueError, match="none, bos, eos, bos_eos, tokenizer_default"):
            call()
    with pytest.raises(ValueError, match="99"):
        tok.decode([6, 99])
    with pytest.raises(ValueError, match="not a token id"):
        tok.decode([2**40])
    with pytest.raises(ValueError, match="num_threads"):
        tok.encode_batch(["a"], num_threads=-1)
    with pytest.raises(TypeError):
        tok.encode(3)
    with pytest.raises(TypeError):
        tok.encode_batch("abc")


def test_missing_eos_is_a_value_error_naming_the_option(tmp_path):
    no_eos = json.loads(json.dumps(TINY).replace("</s>", "[x]"))
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(no_eos), encoding="utf-8")
    tok = zephon.Tokenizer(path)
    assert tok.eos_token_id is None
    with pytest.raises(ValueError, match="eos_token_id"):
        tok.encode("a", "eos")
    assert zephon.Tokenizer(path, eos_token_id=5).encode("a", "eos") == [6, 5]



def test_a_real_transformers_config_with_a_huge_model_max_length(tmp_path):
    (tmp_path / "tokenizer.json").write_text(json.dumps(TINY), encoding="utf-8")
    (tmp_path / "tokenizer_config.json").write_text(
        '{"bos_token": "a", "eos_token": "b", '
        '"model_max_length": 1000000000000000019884624838656}', encoding="utf-8")
    tok = zephon.Tokenizer(tmp_path)
    assert (tok.bos_token_id, tok.eos_token_id) == (4, 5)
