"""Record batches (issue 17): a pipeline without pack_flat delivers each sample as one
record of its own length, through ragged tensors in the ring, as upstream's
SampleRecord / SampleBatch; and ending an iteration hands its lease back."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import zephon
from zephon import errors
from zephon.core.constants import SampleBatch as CoreSampleBatch
from zephon.types import SampleBatch, SampleMeta, SampleRecord

TEXTS = [f"doc {i} " + "é" * (i % 5) + " x" * (i % 7) for i in range(60)]


@pytest.fixture
def text_root(tmp_path) -> Path:
    root = tmp_path / "texts"
    root.mkdir()
    for part in range(2):
        with open(root / f"part-{part}.jsonl", "w", encoding="utf-8") as f:
            for n in range(part * 30, (part + 1) * 30):
                f.write(json.dumps({"body": TEXTS[n], "n": n, "tags": ["t", n % 3]}) + "\n")
    return root


def build(root: Path, socket: str, *, batch: int | None = 4, lanes: int = 2, keep=True,
          **options) -> zephon.Pipeline:
    ds = zephon.Dataset.from_path("texts", str(root), fmt="jsonl")
    ws = zephon.StaticMixtureWorkSource([ds], {"texts": 1.0}, chunk_size=6, seed=3)
    p = zephon.Pipeline(ws).tokenize(tokenizer_id="__fallback__", field="body",
                                      preserve_upstream_payload=keep)
    if batch is not None:
        p.batch(batch, drop_last=False)
    return p.options(daemon=socket, canonical_replicas=lanes, **options)


def fallback_ids(text: str) -> list[int]:
    # The built-in test tokenizer: BOS 1, each UTF-8 byte b as 3 + b, EOS 2.
    return [1] + [3 + b for b in text.encode("utf-8")] + [2]


def drain_records(p: zephon.Pipeline) -> list[SampleRecord]:
    out = []
    for item in p:
        if isinstance(item, SampleRecord):
            out.append(item)
        else:
            out.extend(SampleRecord(r.meta, {k: (np.array(v) if isinstance(v, np.ndarray)
                                                 else v) for k, v in r.payload.items()})
                       for r in item.records)
    return out


def test_every_sample_is_one_whole_record_with_its_text(daemon, text_root):
    p = build(text_root, daemon.socket)
    seen, lanes = [], set()
    for batch in p:
        assert isinstance(batch, SampleBatch) and isinstance(batch, CoreSampleBatch)
        assert batch.is_records and batch.num_rows <= 4
        assert len(batch.lane_ids) == len(batch.chunk_ids) == len(batch.ids) == batch.num_rows
        for record, sid, chunk in zip(batch.records, batch.ids, batch.chunk_ids):
            assert isinstance(record.meta, SampleMeta)
            assert record.meta.sample_id == sid and record.meta.chunk_id == chunk
            assert record.meta.lane_id == batch.lane
            text = record.payload["body"]
            assert record.payload["input_ids"].tolist() == fallback_ids(text)
            # preserve_upstream_payload: the JSONL line's every field, as json reads it.
            n = record.payload["n"]
            assert TEXTS[n] == text and record.payload["tags"] == ["t", n % 3]
            assert set(record.payload) == {"body", "n", "tags", "input_ids"}
            seen.append(text)
        lanes.add(batch.lane)
    assert sorted(seen) == sorted(TEXTS), "every document once, whole, with its own text"
    assert lanes == {0, 1}
    p.close()


def test_without_batch_iteration_yields_records_as_batch_one_does(daemon, text_root):
    unbatched = drain_records(build(text_root, daemon.socket, batch=None))
    assert unbatched and all(isinstance(r, SampleRecord) for r in unbatched)
    ones = drain_records(build(text_root, daemon.socket, batch=1))
    assert [(r.meta, r.payload["body"]) for r in unbatched] == \
        [(r.meta, r.payload["body"]) for r in ones]
    # Yielded on their own, the arrays are copies: valid after the next record.
    assert unbatched[0].payload["input_ids"].tolist() == fallback_ids(unbatched[0].payload["body"])


def test_without_preserve_upstream_payload_records_carry_ids_only(daemon, text_root):
    p = build(text_root, daemon.socket, keep=False)
    batch = next(iter(p))
    assert set(batch.records[0].payload) == {"input_ids"}
    assert "text" not in batch.keys()
    p.close()


def test_to_training_right_pads_the_records(daemon, text_root):
    p = build(text_root, daemon.socket, batch=3, lanes=1)
    batch = next(iter(p))
    rows = [r.payload["input_ids"].tolist() for r in batch.records]
    width = max(map(len, rows))
    out = batch.to_training(as_torch=False, pad_token_id=0, return_loss_mask=True,
                            return_labels=True)
    assert out["input_ids"].shape == (3, width - 1)
    for r, ids in enumerate(rows):
        n = len(ids)
        assert out["input_ids"][r, :n - 1].tolist() == ids[:-1]
        assert out["labels"][r, :n - 1].tolist() == ids[1:]
        assert (out["labels"][r, n - 1:] == -100).all(), "padding is never a label"
        assert out["loss_mask"][r].tolist() == [True] * (n - 1) + [False] * (width - n)
        assert out["positions"][r, :n - 1].tolist() == list(range(n - 1))
    p.close()


def test_resume_mid_batch_and_on_another_microbatch_continues_the_records(daemon, text_root):
    full = [r.payload["body"] for r in drain_records(build(text_root, daemon.socket))]
    p1 = build(text_root, daemon.socket)
    taken, it = [], iter(p1)
    for _ in range(4):  # a whole lane round (C=2): not mid-window
        taken += [r.payload["body"] for r in next(it).records]
    state = p1.checkpoint()
    it.close()
    assert taken == full[:len(taken)]
    for micro in (4, 3, None):  # the same batching, another one, and records one by one
        p2 = build(text_root, daemon.socket, batch=micro).restore(state)
        rest = [r.payload["body"] for r in drain_records(p2)]
        # With 2 lanes the global order interleaves lanes per batch; records are counted
        # per lane, so every record not taken comes exactly once.
        assert sorted(taken + rest) == sorted(full), micro
        if micro == 4:
            assert taken + rest == full
        p2.close()
    p1.close()


def test_an_ended_iteration_hands_its_lease_to_the_next_pipeline(daemon, text_root):
    first = build(text_root, daemon.socket, lanes=1)
    all_texts = [r.payload["body"] for r in drain_records(first)]
    # Exhausted, still held: checkpoint() answers until another Pipeline attaches.
    end_state = first.checkpoint()
    assert zephon.inspect_checkpoint(end_state)["round"] == 0
    second = build(text_root, daemon.socket, lanes=1)
    it = iter(second)
    head = [r.payload["body"] for r in next(it).records]
    assert head == all_texts[:len(head)], "a fresh stream, not a second peer of the first"
    with pytest.raises(RuntimeError, match="iteration ended and a newer Pipeline"):
        first.checkpoint()
    with pytest.raises(RuntimeError, match="lease went to a newer Pipeline of the same rank"):
        next(iter(first))
    it.close()
    third = build(text_root, daemon.socket, lanes=1)
    assert [r.payload["body"] for r in drain_records(third)] == all_texts
    for p in (first, second, third):
        p.close()


def test_an_ended_iteration_keeps_the_lease_of_other_ranks_and_open_iterations(
        daemon, text_root, tmp_path):
    # Another rank of the process attaching never takes a lease; nor does a dropped
    # iterator (next(iter(p))) lose the stream: a new iterator continues it.
    a = build(text_root, daemon.socket, lanes=2, dp_degree=2, dp_group_id=0,
              world_size=2, global_rank=0, run_id="ended-other",
              aggregate_dir=str(tmp_path / "agg"))
    head = next(iter(a)).records[0].payload["body"]
    b = build(text_root, daemon.socket, lanes=2, dp_degree=2, dp_group_id=1,
              world_size=2, global_rank=1, run_id="ended-other",
              aggregate_dir=str(tmp_path / "agg"))
    next(iter(b))
    again = next(iter(a)).records[0].payload["body"]
    assert again != head, "the stream went on"
    a.close()
    b.close()


def test_refusals_name_the_fix(daemon, text_root):
    ds = zephon.Dataset.from_path("texts", str(text_root), fmt="jsonl")
    ws = zephon.StaticMixtureWorkSource([ds], {"texts": 1.0}, chunk_size=6)
    with pytest.raises(errors.InvalidOptionError, match="keeps one text field"):
        zephon.Pipeline(ws).tokenize(tokenizer_id="__fallback__", field=["body", "body2"],
                                     preserve_upstream_payload=True)
    p = build(text_root, daemon.socket, lanes=1, batch=2)
    packed = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], {"texts": 1.0},
                                                              chunk_size=6))
              .tokenize(tokenizer_id="__fallback__", field="body",
                        preserve_upstream_payload=True)
              .pack_flat(max_length=16).batch(2).options(daemon=daemon.socket))
    batch = next(iter(packed))  # keep_payload is not sent with a packer: it changes nothing
    with pytest.raises(ValueError, match="this batch is packed"):
        batch.records
    with pytest.raises(ValueError, match="chunk_ids: this batch is packed"):
        batch.chunk_ids
    packed.close()
    p.close()
