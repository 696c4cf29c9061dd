"""datologyai/Megatron-LM-zephon's MegatronZephonDataLoader (vendored unchanged) driven as
Megatron's pretrain_gpt drives it: built from a TOML data recipe (directly, and through
``zephon_train_valid_test_datasets_provider`` with stubbed ``get_args``/``mpu``), iterated
with ``next()``, its state saved with ``save_state()`` (and, through the provider, with
``torch.save`` at ``get_dataloader_checkpoint_name``) and restored into a fresh loader;
the same for the recipe's ``repeat = false`` path, whose stream must end."""
from __future__ import annotations

import dataclasses
import pickle
import types
from pathlib import Path

import pytest
import torch

from conftest import BOS, EOS

import megatron.training as mtraining
from megatron.core import mpu
from megatron.training.checkpointing import get_dataloader_checkpoint_name
from megatron.training.datasets import zephon_dataloader as zmg

SEQ = 32
MBS = 2


def write_recipe(path: Path, corpus_root: Path, extra: str = "") -> Path:
    """A recipe as a Megatron user writes one: source paths relative to the recipe."""
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / "data").mkdir(exist_ok=True)
    for name in ("prose", "code"):
        link = path.parent / "data" / name
        if not link.exists():
            link.symlink_to(corpus_root / name)
    path.write_text(
        "chunk_size = 16\nseed = 11\n" + extra +
        '[[sources]]\nname = "prose"\npath = "data/prose"\nfmt = "jsonl"\nweight = 3.0\n'
        '[[sources]]\nname = "code"\npath = "data/code"\n')
    return path


@pytest.fixture
def recipe(tmp_path, corpus_root) -> Path:
    return write_recipe(tmp_path / "recipes" / "mix.toml", corpus_root)


def make_loader(config, tokenizer_dir: Path, **kw) -> zmg.MegatronZephonDataLoader:
    args = dict(tokenizer_id=str(tokenizer_dir), bos_token_id=BOS, eos_token_id=EOS,
                micro_batch_size=MBS, sequence_length=SEQ, data_parallel_rank=0,
                data_parallel_size=1)
    args.update(kw)
    return zmg.MegatronZephonDataLoader(config, **args)


def take(loader, n: int) -> list[dict]:
    return [next(loader) for _ in range(n)]


def drain(loader) -> list[dict]:
    return list(loader)


def assert_same(a: list[dict], b: list[dict]) -> None:
    assert len(a) == len(b)
    for i, (x, y) in enumerate(zip(a, b)):
        assert x.keys() == y.keys(), (x.keys(), y.keys())
        for k in x:
            assert torch.equal(x[k], y[k]), f"batch {i} field {k} differs"


def test_recipe_loads_with_relative_paths_and_run_overrides(recipe, corpus_root, tmp_path):
    config = zmg.load_zephon_data_config(recipe)
    assert [(s.name, s.fmt, s.weight) for s in config.sources] == \
        [("prose", "jsonl", 3.0), ("code", None, 1.0)]
    assert Path(config.sources[0].path).resolve() == (corpus_root / "prose").resolve()
    assert config.chunk_size == 16 and config.repeat is True
    args = types.SimpleNamespace(zephon_canonical_replicas=None, zephon_run_id="run-7",
                                 zephon_aggregate_dir=str(tmp_path / "agg"))
    over = zmg.apply_zephon_runtime_overrides(config, args)
    assert over.run_id == "run-7" and over.canonical_replicas is None
    bad = write_recipe(tmp_path / "bad" / "r.toml", corpus_root, 'shuffle = true\n')
    with pytest.raises(ValueError, match="Unknown Zephon data recipe keys: shuffle"):
        zmg.load_zephon_data_config(bad)


def check_batch(b: dict, *, eod_mask: bool, reset_positions: bool, cu_seqlens: bool):
    want = {"tokens", "labels", "loss_mask", "position_ids"} | (
        {"cu_seqlens"} if cu_seqlens else set())
    assert set(b) == want, set(b)  # "ids" excluded; "input_ids"/"positions" renamed
    for k in ("tokens", "labels", "position_ids"):
        assert b[k].shape == (MBS, SEQ) and b[k].dtype == torch.long, (k, b[k].dtype)
    assert b["loss_mask"].shape == (MBS, SEQ)
    tokens, labels = b["tokens"], b["labels"]
    eos_in = tokens == EOS
    if eod_mask:
        # The prediction from a document's </s> to what follows is not trained on.
        assert bool((labels[eos_in] == -100).all())
        assert bool((labels[~eos_in] != -100).all())
    else:
        assert bool((labels != -100).all())
    # Wherever a label is kept it is the next input token.
    kept = labels[:, :-1] != -100
    assert torch.equal(labels[:, :-1][kept], tokens[:, 1:][kept])
    assert torch.equal(b["loss_mask"].bool(), labels != -100)
    pos = b["position_ids"]
    if reset_positions:
        # Document positions: 0 at every <s> (and where a long document was split),
        # else one more than the token before.
        assert bool((pos[:, 1:][tokens[:, 1:] == BOS] == 0).all())
        step = pos[:, 1:] != 0
        assert torch.equal(pos[:, 1:][step], pos[:, :-1][step] + 1)
    else:
        assert torch.equal(pos, torch.arange(SEQ).expand(MBS, SEQ))
    if cu_seqlens:
        cu = b["cu_seqlens"].tolist()
        assert cu[0] == 0 and cu[-1] == MBS * SEQ and cu == sorted(cu)
        assert len(cu) - 1 >= MBS + int((tokens[:, 1:] == BOS).sum())


@pytest.mark.parametrize("eod_mask,reset_positions,cu_seqlens",
                         [(False, False, False), (True, True, True)])
def test_batches_follow_megatrons_gpt_schema(zephond, recipe, tokenizer_dir, eod_mask,
                                             reset_positions, cu_seqlens):
    loader = make_loader(zmg.load_zephon_data_config(recipe), tokenizer_dir,
                         eod_mask_loss=eod_mask, reset_position_ids=reset_positions,
                         return_cu_seqlens=cu_seqlens)
    assert iter(loader) is loader
    batches = take(loader, 6)
    for b in batches:
        check_batch(b, eod_mask=eod_mask, reset_positions=reset_positions,
                    cu_seqlens=cu_seqlens)
    assert sum(int((b["tokens"] == EOS).sum()) for b in batches) >= 3
    assert len({tuple(b["tokens"].flatten().tolist()) for b in batches}) == len(batches)


def test_save_state_restores_the_stream_in_a_fresh_loader(zephond, recipe, tokenizer_dir):
    config = zmg.load_zephon_data_config(recipe)
    expected = take(make_loader(config, tokenizer_dir), 9)

    first = make_loader(config, tokenizer_dir)
    assert_same(take(first, 3), expected[:3])
    state = first.save_state()
    assert set(state) == {"zephon"} and isinstance(state["zephon"], bytes)
    del first

    resumed = make_loader(config, tokenizer_dir)
    resumed.restore_state(state)
    assert_same(take(resumed, 6), expected[3:])


@pytest.mark.parametrize("variant", [
    {},
    {"token_estimation": False, "shuffle_after_pack": False},
    {"shuffle_block_size": None, "shuffle_buffer_size": 16, "shuffle_shards": False},
], ids=["defaults", "no-token-estimation-no-shuffle", "small-shuffle"])
def test_repeat_false_stream_ends_and_resumes_to_the_same_end(zephond, recipe, tokenizer_dir,
                                                              corpus_tokens, variant):
    config = dataclasses.replace(zmg.load_zephon_data_config(recipe), repeat=False,
                                 **variant)
    full = drain(make_loader(config, tokenizer_dir))
    # One pass of each source ("stop_after_passes", 1): the stream ends once both have
    # finished theirs, the one the 3:1 weights exhaust first being drawn again meanwhile.
    # So at least the corpus (less what wrap packing drops: a partial row per chunk and
    # a partial batch at the end) and, for this corpus, well under two passes of it.
    delivered = len(full) * MBS * SEQ
    assert 0.8 * corpus_tokens <= delivered < 2 * corpus_tokens, (delivered, corpus_tokens)
    assert_same(drain(make_loader(config, tokenizer_dir)), full)
    for b in full:
        check_batch(b, eod_mask=False, reset_positions=False, cu_seqlens=False)

    k = len(full) // 2
    first = make_loader(config, tokenizer_dir)
    assert_same(take(first, k), full[:k])
    state = first.save_state()
    del first
    resumed = make_loader(config, tokenizer_dir)
    resumed.restore_state(state)
    assert_same(drain(resumed), full[k:])
    with pytest.raises(StopIteration):
        next(resumed)


def test_repeat_true_outlives_one_pass(zephond, recipe, tokenizer_dir):
    """The same recipe with repeat (the default) yields more batches than one pass has."""
    config = zmg.load_zephon_data_config(recipe)
    one_pass = len(drain(make_loader(dataclasses.replace(config, repeat=False),
                                     tokenizer_dir)))
    loader = make_loader(config, tokenizer_dir)
    assert len(take(loader, one_pass + 10)) == one_pass + 10


def test_restore_state_refuses_malformed_state(recipe, tokenizer_dir, zephond):
    loader = make_loader(zmg.load_zephon_data_config(recipe), tokenizer_dir)
    with pytest.raises(ValueError, match="contain bytes"):
        loader.restore_state({"zephon": "text"})
    with pytest.raises(ValueError, match="deserialize"):
        loader.restore_state({"zephon": b"\x80\x04not a pickle"})


def test_restore_state_refuses_a_checkpoint_that_is_not_zephons(recipe, tokenizer_dir,
                                                                 zephond):
    """Upstream's restore() validates eagerly: restore_state wraps its error as
    ValueError("... malformed or incompatible")."""
    loader = make_loader(zmg.load_zephon_data_config(recipe), tokenizer_dir)
    with pytest.raises(ValueError, match="malformed or incompatible"):
        loader.restore_state({"zephon": pickle.dumps(b"definitely not a checkpoint")})


def provider_args(recipe: Path, tokenizer_dir: Path, **kw) -> types.SimpleNamespace:
    args = dict(
        zephon_data_config=str(recipe), zephon_canonical_replicas=None,
        zephon_aggregate_dir=None, zephon_run_id=None,
        tokenizer_type="HuggingFaceTokenizer", tokenizer_model=str(tokenizer_dir),
        micro_batch_size=MBS, seq_length=SEQ, reset_position_ids=False,
        eod_mask_loss=False, dataloader_inter_document_masking=False,
        eval_iters=0, context_parallel_size=1, rampup_batch_size=None,
        save=None, dataloader_save=None, load=None, iteration=0)
    args.update(kw)
    return types.SimpleNamespace(**args)


def test_provider_builds_saves_and_resumes(zephond, recipe, tokenizer_dir, tmp_path):
    mtraining.set_tokenizer(types.SimpleNamespace(bos_id=BOS, eos_id=EOS))
    save_dir = tmp_path / "dl"
    mtraining.set_args(provider_args(recipe, tokenizer_dir, save=str(tmp_path / "ck"),
                                     dataloader_save=str(save_dir)))
    train, valid, test = zmg.zephon_train_valid_test_datasets_provider([0, 0, 0])
    assert valid is None and test is None
    assert zmg.zephon_train_valid_test_datasets_provider.is_distributed is True
    head = take(train, 4)
    iteration = 4
    path = Path(get_dataloader_checkpoint_name(str(save_dir), iteration, 0))
    path.parent.mkdir(parents=True)
    torch.save({"iteration": iteration, "dataloader_state_dict": train.save_state()}, path)
    expected = take(train, 5)
    del train

    mtraining.set_args(provider_args(recipe, tokenizer_dir, load=str(tmp_path / "ck"),
                                     dataloader_save=str(save_dir), iteration=iteration))
    printed = len(mtraining.PRINTED)
    resumed, _, _ = zmg.zephon_train_valid_test_datasets_provider([0, 0, 0])
    assert mtraining.PRINTED[printed:] == [
        f"> restored Zephon dataloader state from {path}"]
    assert_same(take(resumed, 5), expected)
    del resumed

    # A fresh start from the same recipe reads the first batches again.
    mtraining.set_args(provider_args(recipe, tokenizer_dir))
    again, _, _ = zmg.zephon_train_valid_test_datasets_provider([0, 0, 0])
    assert_same(take(again, 4), head)
    del again

    # A resume whose saved iteration differs is refused, naming both.
    mtraining.set_args(provider_args(recipe, tokenizer_dir, load="ck", iteration=5,
                                     dataloader_save=str(save_dir)))
    other = Path(get_dataloader_checkpoint_name(str(save_dir), 5, 0))
    other.parent.mkdir(parents=True)
    torch.save({"iteration": 4, "dataloader_state_dict": {}}, other)
    with pytest.raises(ValueError, match="expected 5, found 4"):
        zmg.zephon_train_valid_test_datasets_provider([0, 0, 0])


def test_provider_skips_ranks_that_do_not_read_data(recipe, tokenizer_dir):
    mtraining.set_args(provider_args(recipe, tokenizer_dir))
    mpu.TP_RANK = 1
    try:
        assert zmg.zephon_train_valid_test_datasets_provider([0, 0, 0]) == (None, None, None)
    finally:
        mpu.TP_RANK = 0
    mtraining.set_args(provider_args(recipe, tokenizer_dir, eval_iters=10))
    with pytest.raises(ValueError, match="eval-iters 0"):
        zmg.zephon_train_valid_test_datasets_provider([0, 0, 0])
