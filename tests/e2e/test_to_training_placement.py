"""to_training's upstream defaults (issue 18: return_labels=False, dtype torch.long),
extra_fields, and device= / non_blocking / pin_memory.

This machine has no GPU, so two kinds of test: what a CPU-only machine does (pin_memory is
a no-op with one warning; device="cuda" is an InvalidOptionError), and the CUDA paths
with ``zephon._cuda`` (the only module that touches CUDA) replaced by a recorder: the ring
is registered once per mapping and unregistered when the Pipeline closes, views of the
ring are not copied, computed fields are, and a non-blocking copy is waited for before
the batch's slot is released. Real batches through a daemon."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import zephon
from zephon import _cuda
from zephon.batch import _Placement

from conftest import pipeline

L, B = 33, 2


def open_pipe(corpus, daemon, **kw):
    return pipeline(corpus, daemon.socket, max_length=L, microbatch=B,
                    canonical_replicas=1, **kw)


def test_defaults_are_upstreams(corpus, daemon):
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    tokens = np.array(batch["tokens"])
    out = batch.to_training()
    assert "labels" not in out  # return_labels=False, as upstream
    assert out["input_ids"].dtype == torch.long and tuple(out["input_ids"].shape) == (B, L)
    assert torch.equal(out["input_ids"], torch.from_numpy(tokens.astype(np.int64)))
    assert not np.shares_memory(out["input_ids"].numpy(), batch["tokens"])
    small = batch.to_training(return_labels=True, dtype=torch.int32)
    assert small["input_ids"].dtype == torch.int32 and small["labels"].dtype == torch.int32
    assert torch.equal(small["labels"], torch.from_numpy(tokens[:, 1:].astype(np.int32)))
    views = batch.to_training(dtype=None)  # the zero-copy form stays available
    assert np.shares_memory(views["input_ids"].numpy(), batch["tokens"])
    pipe.close()


def test_extra_fields(corpus, daemon):
    ds = zephon.Dataset.from_path("web", str(corpus), fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=3, chunk_size=32)
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=L, algorithm="best_fit", num_bins=8,
                                          pad_token_id=0)
            .batch(B).options(daemon=daemon.socket, canonical_replicas=1))
    batch = next(iter(pipe))
    valid, positions = np.array(batch["valid_tokens"]), np.array(batch["positions"])
    out = batch.to_training(return_labels=True, as_torch=False,
                            extra_fields=("valid_tokens", "positions"))
    assert np.array_equal(out["valid_tokens"], valid)           # a per-row field, as it is
    assert np.array_equal(out["positions"], positions[:, :-1])  # already returned: once
    # A per-cell field is aligned with input_ids and flattened with it.
    flat = batch.to_training(return_labels=True, as_torch=False, flatten=True,
                             return_positions=False, extra_fields=("tokens",))
    assert flat["tokens"].shape == flat["input_ids"].shape == (B * (L - 1),)
    assert np.array_equal(flat["tokens"], np.array(batch["tokens"])[:, :-1].reshape(-1))
    with pytest.raises(KeyError, match="nope"):
        batch.to_training(extra_fields=("nope",))
    with pytest.raises(ValueError, match="valid_tokens"):  # lists the fields
        batch.to_training(extra_fields=("nope",))
    with pytest.raises(TypeError, match="sequence of names"):
        batch.to_training(extra_fields="valid_tokens")
    pipe.close()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_without_a_gpu(corpus, daemon, monkeypatch):
    monkeypatch.setattr(_Placement, "_warned_no_cuda", False)
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    tokens = np.array(batch["tokens"])
    # pin_memory=True: a documented no-op, warned once per process.
    with pytest.warns(UserWarning, match="no CUDA device.*no-op"):
        out = batch.to_training(pin_memory=True)
    assert torch.equal(out["input_ids"], torch.from_numpy(tokens.astype(np.int64)))
    assert not out["input_ids"].is_pinned()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batch.to_training(pin_memory=True)  # no second warning
        cpu = batch.to_training(device="cpu", non_blocking=True, dtype=None)
    assert cpu["input_ids"].device.type == "cpu"
    assert np.shares_memory(cpu["input_ids"].numpy(), batch["tokens"])  # still a view
    # device="cuda" where there is none: a clear error, never a silent CPU fallback.
    for device in ("cuda", "cuda:1", torch.device("cuda", 0)):
        with pytest.raises(zephon.InvalidOptionError, match=r"torch.cuda.is_available\(\)"):
            batch.to_training(device=device)
    with pytest.raises(zephon.InvalidOptionError, match="not a torch device"):
        batch.to_training(device="gpu-please")
    with pytest.raises(ValueError, match="as_torch=False"):
        batch.to_training(device="cpu", as_torch=False)
    pipe.close()


class FakeCuda:
    """Stands in for zephon._cuda on a machine without a GPU: records every call."""

    def __init__(self, refuse: bool = False):
        self.refuse = refuse
        self.calls: list[tuple] = []

    def install(self, monkeypatch) -> "FakeCuda":
        monkeypatch.setattr(_cuda, "available", lambda: True)
        for name in ("register_host", "unregister_host", "pinned_copy", "to_device",
                     "copy_done_event"):
            monkeypatch.setattr(_cuda, name, getattr(self, name))
        return self

    def register_host(self, base, size):
        self.calls.append(("register", base, size))
        return "refused for the test" if self.refuse else None

    def unregister_host(self, base):
        self.calls.append(("unregister", base))

    def pinned_copy(self, tensor):
        self.calls.append(("pin", tensor.data_ptr()))
        return tensor.clone()

    def to_device(self, tensor, device, non_blocking):
        self.calls.append(("to", str(device), non_blocking))
        return tensor

    def copy_done_event(self, device):
        calls = self.calls

        class Event:
            def synchronize(self):
                calls.append(("synchronize",))
        calls.append(("event", str(device)))
        return Event()

    def named(self, kind):
        return [c for c in self.calls if c[0] == kind]


def ring_of(batch):
    reader = batch._reader
    return reader.region_base, reader.region.nbytes


def test_pinning_registers_the_ring_once(corpus, daemon, monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    pipe = open_pipe(corpus, daemon, max_open_batches=2)
    it = iter(pipe)
    batch = next(it)
    base, size = ring_of(batch)
    out = batch.to_training(return_labels=True, dtype=None, pin_memory=True,
                            return_cu_seqlens=True)
    assert fake.named("register") == [("register", base, size)]
    # Views of the ring are pinned by the registration: not copied, still views.
    assert np.shares_memory(out["input_ids"].numpy(), batch["tokens"])
    assert np.shares_memory(out["labels"].numpy(), batch["tokens"])
    # Only the computed field (cu_seqlens) was copied into pinned memory.
    assert len(fake.named("pin")) == 1
    # torch.long conversions are computed: copied.
    fake.calls.clear()
    second = next(it)
    second.to_training(return_labels=True, pin_memory=True)
    assert fake.named("register") == []  # once per mapping
    assert len(fake.named("pin")) == 3   # input_ids, labels, positions (int64 copies)
    pipe.close()
    del out, batch, second, it
    import gc
    gc.collect()
    assert fake.named("unregister") == [("unregister", base)]


def test_refused_registration_copies_with_a_warning(corpus, daemon, monkeypatch):
    fake = FakeCuda(refuse=True).install(monkeypatch)
    pipe = open_pipe(corpus, daemon)
    batch = next(iter(pipe))
    with pytest.warns(RuntimeWarning, match="could not be registered.*refused for the test"):
        batch.to_training(dtype=None, pin_memory=True)
    assert len(fake.named("pin")) == 2  # input_ids and positions, views: copied instead
    pipe.close()
    del batch
    import gc
    gc.collect()
    assert fake.named("unregister") == []  # nothing was registered


def test_non_blocking_copy_is_waited_for_before_release(corpus, daemon, monkeypatch):
    fake = FakeCuda().install(monkeypatch)
    pipe = open_pipe(corpus, daemon)
    it = iter(pipe)
    batch = next(it)
    released = batch._reader
    out = batch.to_training(return_labels=True, device="cuda:1", non_blocking=True,
                            pin_memory=True)
    assert {c for c in fake.named("to")} == {("to", "cuda:1", True)}
    # Recorded on the copies' device, which need not be the current one.
    assert fake.named("event") == [("event", "cuda:1")] and fake.named("synchronize") == []
    assert set(out) >= {"input_ids", "labels", "positions"}
    before = zephon._native.LIB.zephon_released(released.mapping.handle)
    next(it)  # releases the first batch (max_open_batches=1): waits for its copies first
    assert fake.named("synchronize") == [("synchronize",)]
    assert zephon._native.LIB.zephon_released(released.mapping.handle) == before + 1
    # A blocking copy records no event.
    fake.calls.clear()
    batch = next(it)
    batch.to_training(device="cuda")
    batch.close()
    assert fake.named("event") == [] and fake.named("synchronize") == []
    pipe.close()
