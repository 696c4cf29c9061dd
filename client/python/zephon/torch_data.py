"""A Pipeline as a ``torch.utils.data.IterableDataset`` with the ``state_dict`` /
``load_state_dict`` pair that torchdata's ``StatefulDataLoader`` and
``torch.distributed.checkpoint``'s ``Stateful`` protocol call, so a trainer's
checkpointer saves and restores the data state with the model.

    ds = pipe.to_torch_dataset(transform=lambda b: b.to_training(return_labels=True))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)
    states = {"model": model, "dataloader": ds}   # what the checkpointer saves

``state_dict()`` is the Pipeline's collective ``checkpoint()`` (every rank of the run calls
it at the same step, as a checkpointer does); its value is a plain dict of bytes, so
``torch.save``, pickle and DCP store it as they are. The bytes are the same on every rank,
so DCP's de-duplication of a key every rank saves keeps a correct copy. Before the
pipeline's first batch (attached or not), ``state_dict()`` runs no round: it returns
where the stream will start (the state given to ``load_state_dict()``, or ``b""`` for
the beginning). That is what ``torch.distributed.checkpoint.load`` asks for as its
template before it calls ``load_state_dict()``, and what a checkpoint taken before
training should hold. ``load_state_dict()`` restores before the first batch; ``b""`` (a
state saved before any batch) restores nothing, dropping a restore given before.
Batches stay zero-copy: the loader must not batch (``batch_size=None``), use workers
(zephond already is the worker pool, in another process) or pin memory in a thread (a
batch's views are valid until the next one is asked for).
Thread-compatible, like the Pipeline it wraps. torch is imported on use only.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Optional

from . import errors

if TYPE_CHECKING:
    from .batch import Batch
    from .pipeline import Pipeline

# The state_dict layout; bumped if its keys change (the checkpoint bytes carry their own
# format version).
STATE_FORMAT = 1
_STATE_KEY = "zephon_checkpoint"


def _iterable_dataset_base() -> type:
    try:
        from torch.utils.data import IterableDataset
    except ImportError as e:  # torch is optional for the package
        raise ImportError("Pipeline.to_torch_dataset needs torch (pip install torch, or "
                          "Debian's python3-torch)") from e
    base: type = IterableDataset  # torch is not analysed (Any)
    return base


def make_dataset(pipeline: Pipeline, transform: Optional[Callable[[Batch], Any]] = None
                 ) -> Any:
    # Any: the class derives from torch's IterableDataset, which is imported on use
    # (torch is optional) and so has no static type here.
    """The IterableDataset over `pipeline` (see the module comment)."""
    base = _iterable_dataset_base()

    class ZephonDataset(base):  # type: ignore[misc, valid-type]
        """This rank's batches (``transform(batch)`` when given) as a torch dataset."""

        def __init__(self) -> None:
            super().__init__()
            self.pipeline = pipeline
            self.transform = transform

        def __iter__(self) -> Iterator[Any]:
            from torch.utils.data import get_worker_info
            if get_worker_info() is not None:
                raise RuntimeError(
                    "a Zephon dataset runs in the trainer process: use DataLoader(..., "
                    "num_workers=0); zephond already prepares batches in its own process")
            for batch in self.pipeline:
                yield self.transform(batch) if self.transform is not None else batch

        def state_dict(self) -> dict[str, Any]:
            """The collective checkpoint as ``{"zephon_checkpoint": bytes, "format": 1}``;
            before the first batch, the state the stream starts from (no round)."""
            before_start = self.pipeline._state_before_start()
            if before_start is not None:
                return {_STATE_KEY: before_start, "format": STATE_FORMAT}
            return {_STATE_KEY: self.pipeline.checkpoint(), "format": STATE_FORMAT}

        def load_state_dict(self, state: Mapping[str, Any]) -> None:
            """Restores from what ``state_dict()`` returned (before the first batch)."""
            if not isinstance(state, Mapping) or _STATE_KEY not in state:
                got = (f"keys {sorted(state)!r}" if isinstance(state, Mapping)
                       else type(state).__name__)
                raise errors.InvalidOptionError(
                    "load_state_dict(): expected the dict a Zephon dataset's state_dict() "
                    f"returned (with key {_STATE_KEY!r}), got {got}",
                    errors.INVALID_ARGUMENT)
            if state.get("format", STATE_FORMAT) != STATE_FORMAT:
                raise errors.InvalidOptionError(
                    f"load_state_dict(): state format {state.get('format')!r} is not "
                    f"{STATE_FORMAT}; it was saved by another Zephon version",
                    errors.INVALID_ARGUMENT)
            checkpoint = state[_STATE_KEY]
            if isinstance(checkpoint, (bytes, bytearray, memoryview)) and len(checkpoint) == 0:
                self.pipeline._restore_nothing()  # saved before any batch: the beginning
                return
            self.pipeline.restore(bytes(checkpoint))

    return ZephonDataset()
