"""The Python surface of record-format datasets (Parquet, MDS): fmt, field and on_null
reach the spec as the daemon reads them, and bad values are refused in Python with an
InvalidOptionError naming the value and the fix. No daemon needed."""
from __future__ import annotations

import pytest

import zephon


def test_record_formats_send_field_and_on_null():
    ds = zephon.Dataset.from_path("pt", "/data/tokenized/", fmt="parquet", field="input_ids",
                                  on_null="skip")
    assert ds.to_spec() == {"name": "pt", "path": "/data/tokenized", "format": "parquet",
                            "field": "input_ids", "on_null": "SKIP"}
    mds = zephon.Dataset("m", "s3://bucket/mds", fmt="mds", on_null="error")
    assert mds.to_spec() == {"name": "m", "path": "s3://bucket/mds", "format": "mds",
                             "on_null": "ERROR"}


def test_jsonl_and_auto_detected_datasets_keep_their_spec():
    # The spec (and so the spec hash) of existing pipelines is unchanged: field is still
    # sent as jsonl_field, and nothing new appears unless set.
    assert zephon.Dataset("j", "/d", fmt="jsonl", field="ids").to_spec() == {
        "name": "j", "path": "/d", "format": "jsonl", "jsonl_field": "ids"}
    assert zephon.Dataset("a", "/d").to_spec() == {"name": "a", "path": "/d"}
    assert zephon.Dataset("a", "/d", field="ids").to_spec() == {
        "name": "a", "path": "/d", "jsonl_field": "ids"}


def test_an_unknown_format_is_an_invalid_option_naming_the_formats():
    with pytest.raises(zephon.InvalidOptionError,
                       match=r"fmt='arrow' is not supported; use one of megatron, flat, jsonl, "
                             r"parquet, mds"):
        zephon.Dataset("x", "/d", fmt="arrow")


def test_on_null_is_checked():
    with pytest.raises(zephon.InvalidOptionError,
                       match=r"on_null='drop' is not supported; use one of skip, error"):
        zephon.Dataset("x", "/d", fmt="parquet", on_null="drop")
    with pytest.raises(zephon.InvalidOptionError,
                       match=r"on_null='skip' applies to record formats \(parquet, mds\), not "
                             r"fmt='megatron'"):
        zephon.Dataset("x", "/d", fmt="megatron", on_null="skip")
    # InvalidOptionError is a ValueError, as the Dataset errors were before.
    with pytest.raises(ValueError):
        zephon.Dataset("x", "/d", fmt="jsonl", on_null="error")


def test_tokenize_reads_a_record_formats_text_column():
    ds = zephon.Dataset.from_path("fw", "s3://bucket/fineweb/data/*.parquet", fmt="parquet")
    ws = zephon.StaticMixtureWorkSource([ds])
    pipe = zephon.Pipeline(ws).tokenize(tokenizer="s3://bucket/tok.json", field="text")
    request = pipe.pack_flat(65).batch(2)._request()
    dataset = request["spec"]["work_source"]["datasets"][0]
    assert dataset["format"] == "parquet" and "field" not in dataset
    tokenize = [op["tokenize"] for op in request["spec"]["operators"] if "tokenize" in op]
    assert tokenize[0]["field"] == "text"
