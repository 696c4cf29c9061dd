"""SentencePiece .model files: our Tokenizer (libsentencepiece underneath) against
Debian's spm_encode, on models trained here with spm_train on the corpus."""
import json
import shutil
import subprocess

import pytest

from conftest import run_ours

pytestmark = pytest.mark.skipif(
    shutil.which("spm_train") is None or shutil.which("spm_encode") is None,
    reason="Debian package sentencepiece (spm_train, spm_encode) not installed: make setup")


@pytest.fixture(scope="module")
def lines(corpus_texts):
    # spm_encode reads one sentence per line, so each corpus line is a document here.
    out = []
    for text in corpus_texts:
        out += [line for line in text.replace("\r", "\n").split("\n") if line.strip()]
    return out


@pytest.mark.parametrize("model_type,extra", [
    ("bpe", ["--byte_fallback=true"]),
    ("unigram", []),
])
def test_ids_equal_spm_encode(model_type, extra, lines, encode_tool, tmp_path):
    text_file = tmp_path / "train.txt"
    text_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    prefix = tmp_path / model_type
    subprocess.run(["spm_train", f"--input={text_file}", f"--model_prefix={prefix}",
                    f"--model_type={model_type}", "--vocab_size=800",
                    "--character_coverage=0.9995", "--num_threads=1",
                    "--minloglevel=2", *extra], check=True, capture_output=True)
    model = tmp_path / f"{model_type}.model"
    ref = subprocess.run(["spm_encode", f"--model={model}", "--output_format=id"],
                         stdin=text_file.open("rb"), capture_output=True, check=True)
    ref_ids = [[int(x) for x in line.split()]
               for line in ref.stdout.decode("utf-8").split("\n")[:len(lines)]]
    docs = tmp_path / "docs.jsonl"
    docs.write_text("".join(json.dumps({"text": l}, ensure_ascii=False) + "\n" for l in lines),
                    encoding="utf-8")
    ours = run_ours(encode_tool, model, docs, "--decode")
    assert len(ours) == len(ref_ids) == len(lines) >= 300
    bad = [i for i in range(len(lines)) if ours[i]["ids"] != ref_ids[i]]
    assert not bad, f"{len(bad)} lines differ; first {lines[bad[0]][:100]!r}: " \
                    f"ours {ours[bad[0]]['ids']} spm {ref_ids[bad[0]]}"
    # spm_decode of the same ids, through the library.
    dec = subprocess.run(["spm_decode", f"--model={model}", "--input_format=id"],
                         input=ref.stdout, capture_output=True, check=True)
    ref_text = dec.stdout.decode("utf-8").split("\n")[:len(lines)]
    assert [o["decoded"] for o in ours] == ref_text
