"""SentencePiece .model files: our Tokenizer (libsentencepiece underneath, in its own link
namespace through libzephon_spm_shim.so) against Debian's spm_encode/spm_decode, on models
trained here with spm_train on the corpus; through encode_tool, through zephon.Tokenizer
(a process that has loaded libzephon_c.so and so gRPC's protobuf) and through a C++ binary
linking gRPC's protobuf."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run_ours

pytestmark = pytest.mark.skipif(
    shutil.which("spm_train") is None or shutil.which("spm_encode") is None,
    reason="Debian package sentencepiece (spm_train, spm_encode) not installed: make setup")

MODELS = {"bpe": ["--byte_fallback=true"], "unigram": []}


@pytest.fixture(scope="module")
def lines(corpus_texts):
    # spm_encode reads one sentence per line, so each corpus line is a document here.
    out = []
    for text in corpus_texts:
        out += [line for line in text.replace("\r", "\n").split("\n") if line.strip()]
    return out


@pytest.fixture(scope="module")
def trained(lines, tmp_path_factory):
    """model_type -> (the .model, the training text, spm_encode's ids, spm_decode's text)."""
    tmp = tmp_path_factory.mktemp("spm")
    text_file = tmp / "train.txt"
    text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    cache = {}

    def get(model_type):
        if model_type in cache:
            return cache[model_type]
        prefix = tmp / model_type
        subprocess.run(["spm_train", f"--input={text_file}", f"--model_prefix={prefix}",
                        f"--model_type={model_type}", "--vocab_size=800",
                        "--character_coverage=0.9995", "--num_threads=1",
                        "--minloglevel=2", *MODELS[model_type]], check=True,
                       capture_output=True)
        model = tmp / f"{model_type}.model"
        ref = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"],
                             stdin=text_file.open("rb"), capture_output=True, check=True)
        ref_ids = [[int(x) for x in line.split()]
                   for line in ref.stdout.decode("utf-8").split("\n")[:len(lines)]]
        dec = subprocess.run(["spm_decode", f"--model={model}", "--input_format=id"],
                             input=ref.stdout, capture_output=True, check=True)
        ref_text = dec.stdout.decode("utf-8").split("\n")[:len(lines)]
        assert len(ref_ids) == len(ref_text) == len(lines) >= 300
        cache[model_type] = (model, text_file, ref_ids, ref_text)
        return cache[model_type]
    return get


def assert_same_ids(ours, ref_ids, lines):
    assert len(ours) == len(ref_ids)
    bad = [i for i in range(len(lines)) if ours[i] != ref_ids[i]]
    assert not bad, f"{len(bad)} lines differ; first {lines[bad[0]][:100]!r}: " \
                    f"ours {ours[bad[0]]} spm {ref_ids[bad[0]]}"


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_ids_equal_spm_encode(model_type, trained, lines, encode_tool, tmp_path):
    model, _, ref_ids, ref_text = trained(model_type)
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": l}, ensure_ascii=False) + "\n" for l in lines),
                    encoding="utf-8")
    ours = run_ours(encode_tool, model, docs, "--decode")
    assert_same_ids([o["ids"] for o in ours], ref_ids, lines)
    # spm_decode of the same ids, through the library.
    assert [o["decoded"] for o in ours] == ref_text


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_zephon_tokenizer_equals_spm_encode_and_decode(model_type, trained, lines):
    # This process has loaded libzephon_c.so, and with it gRPC's protobuf 3.21: the shim
    # keeps libsentencepiece's protobuf 3.14 apart (before it, loading a .model crashed).
    import zephon
    model, _, ref_ids, ref_text = trained(model_type)
    tok = zephon.Tokenizer(model)
    assert tok.vocab_size == 800
    assert_same_ids(tok.encode_batch(lines, num_threads=2), ref_ids, lines)
    assert_same_ids([tok.encode(l) for l in lines[:50]], ref_ids[:50], lines[:50])
    assert [tok.decode(ids) for ids in ref_ids] == ref_text
    # spm_train's defaults: <unk>=0, <s>=1, </s>=2.
    assert (tok.bos_token_id, tok.eos_token_id) == (1, 2)
    assert tok.encode(lines[0], special_tokens="bos_eos") == [1, *ref_ids[0], 2]
    assert tok.fingerprint == zephon.Tokenizer(str(model)).fingerprint


def test_a_cc_binary_linking_grpc_protobuf_loads_a_model(trained, lines):
    # //tokenizer:spm_in_grpc_process links gRPC's libprotobuf and the tokenizer, as zephond
    # does; it used to crash while loading libsentencepiece.
    tool = ROOT / "bazel-bin" / "tokenizer" / "spm_in_grpc_process"
    if not tool.exists():
        subprocess.run(["bazel", "build", "//tokenizer:spm_in_grpc_process"], cwd=ROOT,
                       check=True)
    model, text_file, ref_ids, _ = trained("bpe")
    out = subprocess.run([str(tool), str(model)], stdin=text_file.open("rb"),
                         capture_output=True, check=True)
    assert b"protobuf runtime 3.21" in out.stderr
    ours = [[int(x) for x in line.split()]
            for line in out.stdout.decode("utf-8").split("\n")[:len(lines)]]
    assert_same_ids(ours, ref_ids, lines)


def test_a_missing_shim_is_an_error_naming_the_path_and_the_fix(trained):
    # The shim is loaded once per process, so this runs in a fresh interpreter.
    model, *_ = trained("bpe")
    code = ("import sys, zephon\n"
            "try:\n"
            f"    zephon.Tokenizer({str(model)!r})\n"
            "except zephon.ZephonError as e:\n"
            "    print(e.code, e)\n")
    env = dict(os.environ, ZEPHON_SPM_SHIM="/nonexistent/libzephon_spm_shim.so",
               PYTHONPATH=str(ROOT / "client" / "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         check=True, text=True).stdout
    assert out.startswith("9 ") and "/nonexistent/libzephon_spm_shim.so" in out, out
    assert "make build" in out and "ZEPHON_SPM_SHIM" in out, out


def test_a_text_over_max_unsplit_bytes_is_refused_naming_the_limit(trained, encode_tool,
                                                                     tmp_path):
    # libsentencepiece encodes a text whole (~130 bytes held per byte, docs/benchmarks.md):
    # a longer text than the limit is refused, a shorter one encoded.
    model, _, _, _ = trained("bpe")
    docs = tmp_path / "docs.jsonl"
    docs.write_text(json.dumps({"text": "hello world " * 100}) + "\n", encoding="utf-8")
    tool = [str(encode_tool), "--tokenizer", str(model), "--max_unsplit_bytes"]
    refused = subprocess.run(tool + ["1000"], stdin=docs.open("rb"), capture_output=True)
    assert refused.returncode != 0
    err = refused.stderr.decode()
    assert "RESOURCE_EXHAUSTED" in err and "max_unsplit_bytes" in err and "SentencePiece" in err
    encoded = subprocess.run(tool + ["2000"], stdin=docs.open("rb"), capture_output=True)
    assert encoded.returncode == 0 and json.loads(encoded.stdout)["ids"]
