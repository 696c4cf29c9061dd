"""datologyai/torchtitan-zephon's ZephonDataLoader (vendored unchanged) driven as TorchTitan
drives it: the ``@override`` turns the stock loader config into the Zephon one, the loader
is built with the DP coordinates, a tokenizer and the context/batch lengths, iterated, and
its ``state_dict()`` / ``load_state_dict()`` carried through a fresh loader.

TorchTitan's override has no ``repeat=false`` path: it always builds
``exhausted_policy="repeat"``. Its counterpart here is that the stream outlives several
passes over a small corpus and repeats it (test_repeat_outlives_the_corpus)."""
from __future__ import annotations

import hashlib
import pickle
from pathlib import Path

import pytest
import torch

from conftest import BOS, CORPUS, EOS, HERE, _docs, _write_jsonl, full_segments

from torchtitan.components.data.loader import GrainDataLoader
from torchtitan.components.loss import IGNORE_INDEX
from torchtitan.components.tokenizer import BaseTokenizer
from torchtitan import config as tt_config
from torchtitan.overrides import zephon_dataloader as ztt

CONTEXT = 64
TOKENS_PER_BATCH = 32

VENDORED = {
    "torchtitan/overrides/zephon_dataloader.py":
        "42896d43227f23fa050a34f8cbbc7d107634cc6980f8c3d24c699611af2328e7",
    "megatron/training/datasets/zephon_dataloader.py":
        "4c36ba174f64192ada22639f23f9348dea274f90afe647a6492708117177dab8",
}


def test_vendored_files_are_unchanged():
    for rel, digest in VENDORED.items():
        data = (HERE / "vendor" / rel).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, f"vendor/{rel} was edited"


def sources(root: Path) -> list[dict]:
    return [{"name": "prose", "path": str(root / "prose"), "fmt": "jsonl", "weight": 2.0},
            {"name": "code", "path": str(root / "code"), "weight": 1.0}]


def make_config(root: Path, **deltas) -> ztt.ZephonDataLoader.Config:
    """The config TorchTitan's override machinery derives from the stock loader's."""
    args = dict(sources=sources(root), chunk_size=16, seed=7)
    args.update(deltas)
    return ztt.zephon_dataloader(GrainDataLoader.Config(), **args)


def make_loader(cfg, tokenizer_dir: Path, **kw) -> ztt.ZephonDataLoader:
    args = dict(dp_world_size=1, dp_rank=0, tokenizer=BaseTokenizer(str(tokenizer_dir)),
                max_context_length=CONTEXT, num_tokens_per_batch=TOKENS_PER_BATCH)
    args.update(kw)
    return ztt.ZephonDataLoader(cfg, **args)


def take(it, n: int) -> list[dict]:
    return [next(it) for _ in range(n)]


def assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], torch.Tensor):
                assert torch.equal(x[k], y[k]), f"batch {i} field {k} differs"
            else:
                assert x[k] == y[k], f"batch {i} field {k} differs"


def test_override_derives_the_zephon_config(corpus_root, tmp_path):
    reg = [o for o in tt_config.OVERRIDES if o["fn"] is ztt.zephon_dataloader]
    assert len(reg) == 1 and reg[0]["target"] is GrainDataLoader.Config
    assert reg[0]["fqns"] == ["dataloader"] and reg[0]["exact"] is True
    cfg = make_config(corpus_root)
    assert isinstance(cfg, ztt.ZephonDataLoader.Config)
    assert [s.name for s in cfg.sources] == ["prose", "code"]
    assert cfg.sources[0].weight == 2.0 and cfg.chunk_size == 16 and cfg.seed == 7
    # The same through a TOML recipe with paths relative to it.
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'chunk_size = 16\nseed = 7\n'
        f'[[sources]]\nname = "prose"\npath = "{corpus_root / "prose"}"\nweight = 2.0\n'
        f'[[sources]]\nname = "code"\npath = "{corpus_root / "code"}"\n')
    from_recipe = ztt.zephon_dataloader(GrainDataLoader.Config(), data_config=str(recipe))
    assert [(s.name, s.path, s.weight) for s in from_recipe.sources] == \
        [("prose", str(corpus_root / "prose"), 2.0), ("code", str(corpus_root / "code"), 1.0)]


def test_batches_are_shifted_tokens_of_the_corpus(zephond, corpus_root, tokenizer_dir,
                                                   encoded_docs):
    loader = make_loader(make_config(corpus_root), tokenizer_dir)
    batches = take(iter(loader), 12)
    seen = 0
    for b in batches:
        assert set(b) == {"input", "labels", "num_valid_tokens", "positions"}
        for k in ("input", "labels", "positions"):
            assert b[k].shape == (TOKENS_PER_BATCH,) and b[k].dtype == torch.long, k
        inp, lab, pos = b["input"].tolist(), b["labels"].tolist(), b["positions"].tolist()
        assert lab[:-1] == inp[1:], "labels are the inputs shifted by one"
        # Wrap packing has no padding: every label is trained on.
        assert IGNORE_INDEX not in lab and b["num_valid_tokens"] == TOKENS_PER_BATCH
        # Positions restart at every document (<s>), at the row start and where a long
        # document was split; else they count on.
        assert pos[0] == 0
        for t in range(1, len(pos)):
            if inp[t] == BOS:
                assert pos[t] == 0, (t, inp, pos)
            if pos[t]:
                assert pos[t] == pos[t - 1] + 1, (t, inp, pos)
        # Every whole document in the row is a corpus document, tokenized <s> ... </s>.
        for seg in full_segments(inp + lab[-1:]):
            assert seg in encoded_docs, seg
            seen += 1
    assert seen >= 5, "too few whole documents to have checked anything"
    assert any(EOS in b["input"].tolist() for b in batches)


def test_state_dict_restores_the_stream_in_a_fresh_loader(zephond, corpus_root,
                                                          tokenizer_dir):
    cfg = make_config(corpus_root)
    expected = take(iter(make_loader(cfg, tokenizer_dir)), 10)

    first = make_loader(cfg, tokenizer_dir)
    it = iter(first)
    head = take(it, 4)
    assert_same(head, expected[:4])
    state = first.state_dict()
    assert set(state) == {"zephon"} and isinstance(state["zephon"], bytes)
    state = pickle.loads(pickle.dumps(state))  # as DCP stores it
    del it, first

    resumed = make_loader(cfg, tokenizer_dir)
    resumed.load_state_dict(state)
    assert_same(take(iter(resumed), 6), expected[4:])

    # An empty state (a fresh run) leaves the loader at the start.
    fresh = make_loader(cfg, tokenizer_dir)
    fresh.load_state_dict({})
    assert_same(take(iter(fresh), 2), expected[:2])


def test_other_seed_gives_other_batches(zephond, corpus_root, tokenizer_dir):
    a = take(iter(make_loader(make_config(corpus_root), tokenizer_dir)), 3)
    b = take(iter(make_loader(make_config(corpus_root, seed=8), tokenizer_dir)), 3)
    assert any(not torch.equal(x["input"], y["input"]) for x, y in zip(a, b))


def test_repeat_outlives_the_corpus(zephond, tmp_path, tokenizer_dir):
    """The override's only exhaustion policy is "repeat": 12 short documents (~ 4 rows)
    give 40 rows, every document recurring, and a restore mid-way (past the first pass)
    continues the same repeated stream."""
    docs = _docs(9, 12, 6)
    _write_jsonl(tmp_path / "tiny", docs, per_file=6)
    cfg = ztt.zephon_dataloader(
        GrainDataLoader.Config(), chunk_size=4, seed=3,
        sources=[{"name": "tiny", "path": str(tmp_path / "tiny"), "fmt": "jsonl"}])
    total = sum(len(d.split()) + 2 for d in docs)
    n = 40
    assert n * TOKENS_PER_BATCH > 3 * total
    batches = take(iter(make_loader(cfg, tokenizer_dir)), n)
    bos = sum(int((b["input"] == BOS).sum()) for b in batches)
    assert bos >= 2 * len(docs), "documents did not recur across passes"

    first = make_loader(cfg, tokenizer_dir)
    it = iter(first)
    k = n // 2
    take(it, k)
    state = first.state_dict()
    del it, first
    resumed = make_loader(cfg, tokenizer_dir)
    resumed.load_state_dict(state)
    assert_same(take(iter(resumed), n - k), batches[k:])


def test_gloo_group_of_one_gives_the_same_stream(zephond, corpus_root, tokenizer_dir,
                                                 tmp_path):
    """With torch.distributed initialised the override adds world_size/global_rank."""
    import torch.distributed as dist
    cfg = make_config(corpus_root)
    plain = take(iter(make_loader(cfg, tokenizer_dir)), 3)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}",
                            rank=0, world_size=1)
    try:
        opts = ztt.ZephonDataLoader._runtime_options(cfg, 1, 0)
        assert opts["world_size"] == 1 and opts["global_rank"] == 0
        assert_same(take(iter(make_loader(cfg, tokenizer_dir)), 3), plain)
    finally:
        dist.destroy_process_group()


def test_loader_refuses_what_it_cannot_run(corpus_root, tokenizer_dir):
    with pytest.raises(ValueError, match="aggregate_dir"):
        make_loader(make_config(corpus_root), tokenizer_dir, dp_world_size=2)
    with pytest.raises(ValueError, match="tokenizer_path"):
        make_loader(make_config(corpus_root), tokenizer_dir, tokenizer=BaseTokenizer(None))
    with pytest.raises(ValueError, match="max_num_documents"):
        cfg = ztt.ZephonDataLoader.Config(sources=make_config(corpus_root).sources,
                                          max_num_documents=5)
        make_loader(cfg, tokenizer_dir)
