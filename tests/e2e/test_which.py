"""zephon.which / `zephonctl which`: the samples of a global step, computed from the
spec (or a checkpoint) alone, are the ones the daemon delivered in that step: the same
lanes, lane batches and documents, and token for token the same rows."""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

import zephon
from conftest import pipeline
from zephond_process import Daemon, zephonctl_path


def _rows_from(answer_batch: dict, cols: int, pad: int = 0) -> np.ndarray:
    """A batch's token rows rebuilt from which's segments (--tokens)."""
    rows = np.full((answer_batch["rows"], cols), pad, dtype=np.int64)
    filled = [0] * answer_batch["rows"]
    for seg in answer_batch["segments"]:
        r = seg["row"]
        if "padding" in seg:
            filled[r] += seg["padding"]
            continue
        toks = seg["tokens"]
        rows[r, filled[r]:filled[r] + len(toks)] = toks
        filled[r] += len(toks)
    assert filled == [cols] * answer_batch["rows"]
    return rows


def _documents_named(answer_batch: dict) -> list[tuple[int, int, int]]:
    """The (dataset, shard, doc) ids a batch of which's answer names, in order: the ids
    a delivered batch carries."""
    named = []
    for seg in answer_batch["segments"]:
        key = (seg["dataset_index"], seg["shard"], seg["doc"])
        if "padding" not in seg and key not in named:
            named.append(key)
    return named


def test_which_names_what_each_step_delivered(corpus, daemon):
    # Two lanes, steps of four micro-batches (two from each lane), one rank: the rank's
    # batches 4N..4N+3 are step N.
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=5, chunk_size=32)
    p = (zephon.Pipeline(ws).shuffle(64, seed=3).pack_flat(max_length=65).batch(2)
         .options(daemon=daemon.socket, canonical_replicas=2))
    delivered = []
    for i, batch in enumerate(p):
        delivered.append((batch.lane, batch.lane_batch_index, [tuple(x) for x in batch.ids],
                          np.array(batch["tokens"], dtype=np.int64)))
        batch.close()
        if i == 4 * 6 - 1:
            break
    for step in (0, 3, 5):
        answer = zephon.which(p, step, global_batches=4, tokens=True)
        assert answer["step"] == step and answer["global_batches"] == 4
        assert len(answer["batches"]) == 4
        for b in answer["batches"]:
            lane, lane_batch, ids, tokens = delivered[4 * step + b["batch_in_step"]]
            assert (b["lane"], b["lane_batch"]) == (lane, lane_batch)
            assert _documents_named(b) == ids
            assert np.array_equal(_rows_from(b, tokens.shape[1]), tokens)
            assert all(s["file"].startswith("shard-") for s in b["segments"])
            assert all(s["dataset"] == "web" for s in b["segments"])
    # The inverse: a document of step 3 is found there, in the rows which named.
    b = answer["batches"][0]
    seg = next(s for s in b["segments"] if "padding" not in s)
    found = zephon.which(p, sample=(seg["dataset_index"], seg["shard"], seg["doc"]),
                         global_batches=4)
    hits = [(o["step"], o["lane"], o["lane_batch"], piece["row"], piece["token_start"])
            for o in found["occurrences"] for piece in o["pieces"]]
    assert (5, b["lane"], b["lane_batch"], seg["row"], seg["token_start"]) in hits
    by_name = zephon.which(p, sample=f"web/{seg['file']}/{seg['doc']}", global_batches=4)
    assert by_name["occurrences"] == found["occurrences"]
    p.close()


def test_which_from_a_checkpoint_and_across_dp_degrees(corpus, daemon, tmp_path):
    p = pipeline(corpus, daemon.socket, canonical_replicas=4, microbatch=2, max_length=65)
    taken = []
    it = iter(p)
    for _ in range(8):  # two steps of 4
        b = next(it)
        taken.append((b.lane, b.lane_batch_index))
        b.close()
    state = p.checkpoint()
    later = []
    for _ in range(8):  # steps 2 and 3
        b = next(it)
        later.append((b.lane, b.lane_batch_index, [tuple(x) for x in b.ids]))
        b.close()
    it.close()
    p.close()
    # From the checkpoint (its spec; counting anchored at its lane positions).
    for step in (2, 3):
        answer = zephon.which(state, step)
        got = [(b["lane"], b["lane_batch"]) for b in answer["batches"]]
        assert got == [x[:2] for x in later[4 * (step - 2):4 * (step - 1)]]
    # The same step attributed to 2 DP groups: each group's two batches, its own lanes.
    two = zephon.which(state, 3, dp_degree=2)
    assert [(b["dp_group"], b["batch_in_step"], b["lane"]) for b in two["batches"]] == [
        (0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert {b["lane_batch"] for b in two["batches"]} == {3}
    # The text form, from the file, as an operator runs it.
    ckpt = tmp_path / "ckpt.bin"
    ckpt.write_bytes(state)
    out = subprocess.run([zephonctl_path(), "which", "--spec", str(ckpt), "--step", "2"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("step 2: 4 micro-batches (1 from each of 4 lanes)")
    assert "DP_GROUP" in out.stdout and "shard-" in out.stdout


def test_which_refuses_what_it_cannot_answer(corpus, daemon, tmp_path):
    p = pipeline(corpus, daemon.socket, canonical_replicas=2)
    with pytest.raises(zephon.InvalidOptionError, match="multiple of canonical_replicas 2"):
        zephon.which(p, 0, global_batches=3)
    with pytest.raises(zephon.InvalidOptionError, match="past the end of lane"):
        zephon.which(p, 10**9)
    bad = tmp_path / "junk.json"
    bad.write_text("{not json")
    with pytest.raises(zephon.InvalidOptionError, match="neither a checkpoint"):
        zephon.which(str(bad), 0)


def test_which_text_decodes_each_piece_with_the_tokenizer(daemon, tmp_path):
    # A Megatron corpus of tokenized sentences: --text shows each piece decoded.
    from test_tokenize_pipeline import tiny_tokenizer_json

    tok_path = tmp_path / "tokenizer.json"
    tok_path.write_text(tiny_tokenizer_json(), encoding="utf-8")
    tok = zephon.Tokenizer(str(tok_path))
    # Words the tiny tokenizer knows ("a", "b"), in varying counts.
    texts = [" ".join(["a"] * (i % 7 + 1) + ["b"] * (i % 5 + 1)) for i in range(200)]
    docs = [np.array(tok.encode(t), dtype=np.int64) for t in texts]
    (tmp_path / "c").mkdir()
    zephon.write_megatron_dataset(tmp_path / "c" / "s", docs, dtype=np.uint16)
    ds = zephon.Dataset.from_path("web", str(tmp_path / "c" / "s"), fmt="megatron")
    p = (zephon.Pipeline(zephon.StaticMixtureWorkSource([ds], chunk_size=16))
         .pack_flat(max_length=64).batch(2).options(daemon=daemon.socket))
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(p._request()))
    out = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step", "1",
                          "--text", str(tok_path), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    segments = [s for b in json.loads(out.stdout)["batches"] for s in b["segments"]]
    assert len(segments) > 2
    for s in segments:  # each piece is its document's ids [start, end), decoded
        ids = docs[s["doc"]][s["token_start"]:s["token_end"]].tolist()
        assert s["text"] == tok.decode(ids), s
    assert any(s["text"] != segments[0]["text"] for s in segments)
    p.close()


def test_which_starts_from_the_step_anchors_a_run_left(corpus, tmp_path):
    # A run leaves, in its daemon's cache directory and in its directory under a local
    # aggregate_dir (shared by its nodes), where each lane stood every 4,096 records; a
    # later `which` of a step that run reached starts there instead of counting every
    # flush group from the start, and answers the same.
    node_cache = tmp_path / "node-cache"
    d = Daemon(tmp_path / "d", extra_args=["--cache-dir", str(node_cache)], peer=False)
    try:
        ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
        ws = zephon.StaticMixtureWorkSource([ds], seed=77, chunk_size=8,
                                            exhausted_policy="repeat")
        p = (zephon.Pipeline(ws).shuffle(64, seed=3).pack_flat(max_length=33).batch(4)
             .options(daemon=d.socket, canonical_replicas=2, run_id="anchored",
                      aggregate_dir=str(tmp_path / "agg")))
        spec = tmp_path / "spec.json"
        spec.write_text(json.dumps(p._request()))
        delivered = []
        for i, batch in enumerate(p):  # 1,200 lane batches (4,800 records) per lane
            delivered.append((batch.lane, batch.lane_batch_index, [tuple(x) for x in batch.ids]))
            batch.close()
            if i == 2 * 1200 - 1:
                break
        p.close()
    finally:
        d.stop()
    anchor_dirs = list((node_cache / "anchors").iterdir())
    assert len(anchor_dirs) == 1  # one spec
    assert [f.suffix for f in anchor_dirs[0].iterdir()] == [".zaudit"]  # one instance
    run_anchors = tmp_path / "agg" / "anchored" / "anchors" / anchor_dirs[0].name
    assert [f.suffix for f in run_anchors.iterdir()] == [".zaudit"]

    def which(*extra: str) -> dict:
        # A user with an empty cache of their own: anchors come only from --anchors.
        env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "user-cache"))
        out = subprocess.run([zephonctl_path(), "which", "--spec", str(spec), "--step", "1150",
                              "--json", *extra], capture_output=True, text=True, timeout=120,
                             env=env)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    counted = which("--count-from-start")
    from_run = which("--anchors", str(tmp_path / "agg" / "anchored"))
    anchored = which("--anchors", str(node_cache))
    assert anchored["spec_hash"] == anchor_dirs[0].name
    assert counted["anchors"] == 0
    assert from_run["anchors"] >= 4  # both lanes at record 0 and past 4,096
    assert anchored["anchors"] >= 4
    del counted["anchors"], anchored["anchors"], from_run["anchors"]
    assert anchored == counted
    assert from_run == counted
    for b in anchored["batches"]:  # and it is what the run delivered
        lane, lane_batch, ids = delivered[2 * 1150 + b["batch_in_step"]]
        assert (b["lane"], b["lane_batch"]) == (lane, lane_batch)
        assert _documents_named(b) == ids
    # The query kept its own counts: the user's next query starts from them.
    kept = which()
    assert kept["anchors"] >= 2  # a lane each: counted on from the run's anchors
    del kept["anchors"]
    assert kept == counted
