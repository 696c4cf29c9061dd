"""Pipeline.tokenize end to end: the Python arguments, the attach request, and zephond
loading the tokenizer (errors at attach, the fingerprint check, large inline tokenizers).

The tokenizer is the tiny Llama 2 style tokenizer.json the C++ tests share
(tokenizer/tiny_tokenizer_testing.h): vocabulary "▁", "a", "b", "▁a", "ab", BOS <s> = 1,
EOS </s> = 2; any other character is <unk> (0)."""
from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon import errors

ROOT = Path(__file__).resolve().parents[2]


def tiny_tokenizer_json() -> str:
    header = (ROOT / "tokenizer" / "tiny_tokenizer_testing.h").read_text(encoding="utf-8")
    return re.search(r'R"json\((.*)\)json"', header, re.S).group(1)


@pytest.fixture
def tiny(tmp_path) -> Path:
    path = tmp_path / "tok" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(tiny_tokenizer_json(), encoding="utf-8")
    return path


def write_text_dataset(root: Path, docs: list[str], *, per_file: int = 100,
                       field: str = "text") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(0, len(docs), per_file):
        with open(root / f"part-{i // per_file:03d}.jsonl", "w", encoding="utf-8") as f:
            for j, text in enumerate(docs[i:i + per_file]):
                f.write(json.dumps({"id": i + j, field: text}) + "\n")
    return root


def text_pipeline(data: Path, tokenizer, *, seed: int = 5, chunk_size: int = 16,
                  max_length: int = 33, microbatch: int = 2, tokenize: dict | None = None,
                  **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("text", str(data), fmt="jsonl")
    ws = zephon.StaticMixtureWorkSource([ds], seed=seed, chunk_size=chunk_size)
    return (zephon.Pipeline(ws).tokenize(tokenizer, **(tokenize or {}))
            .pack_flat(max_length=max_length).batch(microbatch).options(**options))


def tokenize_op(pipe: zephon.Pipeline) -> dict:
    return pipe._request()["spec"]["operators"][0]["tokenize"]


# ----- the Python side: arguments and the request (no daemon) ------------------------

def test_tokenize_request_carries_an_absolute_path_the_fingerprint_and_every_option(
        tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tiny.parent.parent)
    pipe = text_pipeline(tmp_path, os.path.join("tok", "tokenizer.json"),
                         tokenize=dict(field="body", special_tokens="eos", eos_token_id=2,
                                       max_length=8, split_long_samples=True,
                                       on_missing="skip", split_special_tokens=True))
    op = tokenize_op(pipe)
    assert op["tokenizer_path"] == str(tiny)
    assert op["fingerprint"] == zephon.Tokenizer(tiny, split_special_tokens=True,
                                                 eos_token_id=2).fingerprint
    assert op["field"] == "body" and op["special_tokens"] == "EOS"
    assert op["on_missing"] == "SKIP" and op["eos_token_id"] == 2 and "bos_token_id" not in op
    assert op["max_length"] == "8" and op["split_long_samples"] and not op["truncation"]
    assert op["split_special_tokens"] is True
    # Operators after tokenize keep their order.
    assert [next(iter(o)) for o in pipe._request()["spec"]["operators"]] == [
        "tokenize", "pack_flat", "batch"]


def test_tokenize_takes_urls_tokenizer_objects_and_to_str_objects(tiny, tmp_path):
    op = tokenize_op(text_pipeline(tmp_path, "s3://bucket/models/llama"))
    assert op["tokenizer_path"] == "s3://bucket/models/llama" and "fingerprint" not in op
    assert tokenize_op(text_pipeline(tmp_path, Path("s3://bucket/t.json")))[
        "tokenizer_path"] == "s3://bucket/t.json"

    class HfLike:  # a `tokenizers.Tokenizer`
        def to_str(self):
            return tiny_tokenizer_json()

    class TransformersLike:  # a fast tokenizer: backend_tokenizer + its BOS/EOS names
        backend_tokenizer = HfLike()
        bos_token = "</s>"
        eos_token = "</s>"

    op = tokenize_op(text_pipeline(tmp_path, HfLike()))
    assert base64.b64decode(op["tokenizer_json"]).decode() == tiny_tokenizer_json()
    assert op["fingerprint"] == zephon.Tokenizer(tiny).fingerprint
    op = tokenize_op(text_pipeline(tmp_path, TransformersLike()))
    assert json.loads(base64.b64decode(op["tokenizer_config_json"])) == {
        "bos_token": "</s>", "eos_token": "</s>"}
    assert op["fingerprint"] == zephon.Tokenizer(TransformersLike()).fingerprint
    # A zephon.Tokenizer: its path and its options are the defaults.
    tok = zephon.Tokenizer(tiny, bos_token_id=2)
    op = tokenize_op(text_pipeline(tmp_path, tok))
    assert op["tokenizer_path"] == str(tiny) and op["bos_token_id"] == 2
    assert op["fingerprint"] == tok.fingerprint
    op = tokenize_op(text_pipeline(tmp_path, tok, tokenize=dict(bos_token_id=1)))
    assert op["bos_token_id"] == 1 and op["fingerprint"] == zephon.Tokenizer(tiny).fingerprint
    with pytest.raises(TypeError, match=r"tokenizer must be a path .* not int"):
        text_pipeline(tmp_path, 42)


@pytest.mark.parametrize("kwargs, message", [
    (dict(special_tokens="start"), r"special_tokens='start' is not supported; use one of "
                                   r"bos_eos, bos, eos, none, tokenizer_default"),
    (dict(on_missing="ignore"), r"on_missing='ignore' is not supported; use one of error, skip"),
    (dict(field=""), r"field must be a non-empty str"),
    (dict(bos_token_id=-1), r"bos_token_id must be a token id"),
    (dict(eos_token_id="2"), r"eos_token_id must be a token id"),
    (dict(max_length=0, truncation=True), r"max_length must be an int >= 1"),
    (dict(truncation=True), r"truncation=True needs max_length"),
    (dict(split_long_samples=True), r"split_long_samples=True needs max_length"),
    (dict(truncation=True, split_long_samples=True, max_length=4),
     r"truncation=True and split_long_samples=True: choose one"),
    (dict(max_length=4), r"max_length=4 without truncation=True or split_long_samples=True"),
    (dict(truncation=1, max_length=4), r"truncation must be True or False"),
])
def test_bad_tokenize_arguments_are_refused_naming_them(tiny, tmp_path, kwargs, message):
    with pytest.raises(errors.InvalidOptionError, match=message):
        text_pipeline(tmp_path, tiny, tokenize=kwargs)


def test_tokenize_comes_first_and_once(tiny, tmp_path):
    ws = zephon.StaticMixtureWorkSource([zephon.Dataset("t", str(tmp_path), fmt="jsonl")])
    with pytest.raises(errors.InvalidOptionError, match=r"call tokenize\(\) before shuffle\(\)"):
        zephon.Pipeline(ws).shuffle(8).tokenize(tiny)
    with pytest.raises(errors.InvalidOptionError, match=r"call tokenize\(\) once"):
        zephon.Pipeline(ws).tokenize(tiny).tokenize(tiny)


# ----- zephond: errors at attach ------------------------------------------------------

def attach_error(pipe: zephon.Pipeline) -> errors.ZephonError:
    with pytest.raises(errors.ZephonError) as info:
        pipe.attach()
    pipe.close()
    return info.value


def test_attach_refuses_a_missing_tokenizer_naming_it(daemon, tmp_path):
    data = write_text_dataset(tmp_path / "data", ["a b"] * 10)
    missing = tmp_path / "nope" / "tokenizer.json"
    e = attach_error(text_pipeline(data, missing, daemon=daemon.socket))
    assert isinstance(e, errors.NotFoundError), e
    assert str(missing) in str(e)


def test_attach_refuses_a_malformed_tokenizer_naming_the_json_path(daemon, tmp_path, tiny):
    data = write_text_dataset(tmp_path / "data", ["a b"] * 10)
    pipe = text_pipeline(data, tiny, daemon=daemon.socket)  # loads fine in the client
    tiny.write_text(tiny_tokenizer_json().replace('"type": "BPE"', '"type": "Unigram"'),
                    encoding="utf-8")
    e = attach_error(pipe)
    assert isinstance(e, errors.InvalidOptionError), e
    assert f"tokenizer '{tiny}'" in str(e) and "model.type 'Unigram' is not supported" in str(e)


def test_attach_refuses_a_tokenizer_that_differs_from_the_clients(daemon, tmp_path, tiny):
    data = write_text_dataset(tmp_path / "data", ["a b"] * 10)
    pipe = text_pipeline(data, tiny, daemon=daemon.socket)
    client = tokenize_op(pipe)["fingerprint"]
    # Another file at the same path on the daemon's side (here: rewritten meanwhile).
    tiny.write_text(tiny_tokenizer_json().replace('"merges": ["▁ a", "a b"]',
                                                  '"merges": ["a b", "▁ a"]'), encoding="utf-8")
    e = attach_error(pipe)
    assert isinstance(e, errors.SpecMismatchError), e
    assert f"fingerprint {client}" in str(e) and "zephond loaded fingerprint sha256:" in str(e)


def test_attach_refuses_tokenize_over_a_megatron_dataset_naming_it(daemon, corpus, tiny):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    pipe = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds])).tokenize(tiny)
            .pack_flat(33).batch(2).options(daemon=daemon.socket))
    e = attach_error(pipe)
    assert isinstance(e, errors.InvalidOptionError), e
    assert "('web').format 'megatron': the tokenize operator reads text" in str(e)


# ----- zephond: text datasets through the engine --------------------------------------

WORDS = ["a", "b", "ab", "ba", "aab", "bba", "abab"]


def documents(n: int, seed: int = 3) -> list[str]:
    import random
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 40))) for _ in range(n)]


def assert_batches_pack_the_encodings(batches, docs, tok, per_file: int = 100):
    """Each record of a batch is a run of the concatenated encodings of the batch's
    samples, in order (pack_flat wraps documents across records and drops a leftover at
    each flush, so a record may start inside a sample)."""
    assert batches
    for tokens, ids in batches:
        stream = []
        for sid in ids:
            stream += tok.encode(docs[sid.shard * per_file + sid.index], special_tokens="bos_eos")
        for row in tokens.tolist():
            assert any(stream[s:s + len(row)] == row for s in range(len(stream) - len(row) + 1)), (
                ids, row[:20])


def read_all(pipe, limit: int = 10_000):
    out = []
    for batch in pipe:
        out.append((np.array(batch["tokens"]), batch.ids))
        batch.close()
        if len(out) >= limit:
            break
    return out


def test_text_batches_are_the_packed_encodings_of_their_samples(daemon, tmp_path, tiny):
    docs = documents(300)
    data = write_text_dataset(tmp_path / "data", docs)
    pipe = text_pipeline(data, tiny, daemon=daemon.socket)
    batches = read_all(pipe)
    assert_batches_pack_the_encodings(batches, docs, zephon.Tokenizer(tiny))
    text = pipe.explain()
    assert "tokenize (at dataset open, into the token cache): " f"'{tiny}'" in text
    assert "text dataset 'text': records=300" in text
    [status] = [s for s in daemon.status()["instances"]
                if s["instance_id"] == pipe.attach_info["instance_id"]]
    assert status["tokenize"].startswith(f"'{tiny}' fingerprint=sha256:")
    pipe.close()


C = 4  # lanes of the multi-group tests


def dp_job(data, tiny, socket, agg, dp, run_id, restore=None):
    """One Pipeline per DP group (Megatron style: world_size == dp_degree), iterating."""
    pipes = [text_pipeline(data, tiny, daemon=socket, world_size=dp, global_rank=g,
                           dp_degree=dp, dp_group_id=g, canonical_replicas=C, run_id=run_id,
                           aggregate_dir=agg)
             for g in range(dp)]
    for p in pipes:
        if restore is not None:
            p.restore(restore)
    return pipes, [iter(p) for p in pipes]


def read_steps(iters, n):
    """n steps of C batches over the DP groups: per step the sorted (tokens, ids)."""
    out = []
    for _ in range(n):
        got = []
        for it in iters:
            for _ in range(C // len(iters)):
                b = next(it)
                got.append((b["tokens"].tobytes(), tuple(b.ids)))
                b.close()
        out.append(sorted(got))
    return out


def test_text_steps_are_equal_for_every_dp_degree(daemon, tmp_path, tiny):
    data = write_text_dataset(tmp_path / "data", documents(400, seed=4))
    steps = {}
    for dp in (1, 2, 4):
        pipes, iters = dp_job(data, tiny, daemon.socket, str(tmp_path / "agg"), dp, f"dp{dp}")
        steps[dp] = read_steps(iters, 5)
        for p in pipes:
            p.close()
    assert steps[1] == steps[2] == steps[4]


def test_text_dataset_missing_field_names_file_and_line(daemon, tmp_path, tiny):
    data = write_text_dataset(tmp_path / "data", ["a b"] * 20)
    with open(data / "part-000.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"id": 99, "body": "a"}) + "\n")
    e = attach_error(text_pipeline(data, tiny, daemon=daemon.socket))
    assert "part-000.jsonl" in str(e) and "line 21" in str(e), e
    # on_missing="skip" reads the rest, and status (hence /metrics) counts what it skipped.
    with open(data / "part-000.jsonl", "ab") as f:
        f.write(b'{"id": 100, "text": "caf\xe9 \xff ok"}\n')  # Latin-1 bytes: not UTF-8
    pipe = text_pipeline(data, tiny, daemon=daemon.socket, tokenize=dict(on_missing="skip"))
    assert read_all(pipe, limit=2)
    texts = [t for i in daemon.status()["instances"] for t in i.get("text_datasets", [])]
    assert texts, daemon.status()
    assert int(texts[0]["records"]) == 22 and int(texts[0]["skipped_missing"]) == 1, texts
    assert int(texts[0]["invalid_utf8_records"]) == 1, texts
    pipe.close()


def test_a_multi_megabyte_inline_tokenizer_attaches_and_is_not_stored(daemon, tmp_path):
    spec = json.loads(tiny_tokenizer_json())
    vocab = spec["model"]["vocab"]
    for i in range(300_000):  # pads tokenizer.json past 8 MB, like Llama 3's
        vocab[f"pad_token_number_{i:07d}"] = 11 + i
    text = json.dumps(spec)
    assert len(text) > 8_000_000

    class Inline:
        def to_str(self):
            return text

    docs = documents(200, seed=5)
    data = write_text_dataset(tmp_path / "data", docs)
    pipe = text_pipeline(data, Inline(), daemon=daemon.socket)
    assert len(json.dumps(pipe._request())) > 8_000_000
    batches = read_all(pipe)
    assert_batches_pack_the_encodings(batches, docs, zephon.Tokenizer(Inline()))
    explain = pipe.explain()
    assert "inline tokenizer.json fingerprint=sha256:" in explain
    assert "pad_token_number" not in explain and len(explain) < 100_000
    pipe.close()


def test_text_checkpoint_restores_on_another_dp_degree(daemon, tmp_path, tiny):
    from concurrent.futures import ThreadPoolExecutor
    data = write_text_dataset(tmp_path / "data", documents(400, seed=6))
    agg = str(tmp_path / "agg")
    pipes, iters = dp_job(data, tiny, daemon.socket, agg, 2, "ckpt")
    read_steps(iters, 2)
    with ThreadPoolExecutor(2) as pool:  # checkpoint() is collective over the ranks
        states = list(pool.map(lambda p: p.checkpoint(), pipes))
    assert states[0] == states[1]
    later = read_steps(iters, 3)
    for p in pipes:
        p.close()
    pipes, iters = dp_job(data, tiny, daemon.socket, agg, 1, "ckpt", restore=states[0])
    assert read_steps(iters, 3) == later
    for p in pipes:
        p.close()
