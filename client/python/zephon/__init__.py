"""Zephon: deterministic, checkpointable, elastic data loading for distributed training,
served by one zephond daemon per node over shared memory.

    import zephon
    ds = zephon.Dataset.from_path("web", "/data/web", fmt="megatron")
    ws = zephon.StaticMixtureWorkSource([ds], seed=1234, chunk_size=1024)
    pipe = (zephon.Pipeline(ws).pack_flat(max_length=2049).batch(8)
            .options(dp_degree=4, dp_group_id=1, world_size=8, global_rank=3,
                     canonical_replicas=8, aggregate_dir="/shared/agg", run_id="r1"))
    for batch in pipe:
        tokens = batch["tokens"]   # numpy [B, L] view into shared memory

    tok = zephon.Tokenizer("models/llama3/tokenizer.json")  # the daemon's tokenizer
    ids = tok.encode("Hello", special_tokens="bos")
"""
from ._version import __version__
from .batch import Batch, SampleId
from .checkpoints import inspect_checkpoint
from .corpus import write_megatron_dataset
from .errors import (DaemonUnavailableError, InvalidOptionError, NotFoundError, PeerLostError,
                     PipelineError, ResourceExhaustedError, SpecMismatchError, ZephonError,
                     ZephonTimeoutError)
from .pipeline import Pipeline, daemon_status
from .provenance import which
from .sources import (Dataset, MixtureSpec, ScheduledMixtureWorkSource, StaticMixtureWorkSource,
                      TokenEstimation)
from .tokenizer import Tokenizer

__all__ = [
    "__version__", "Batch", "DaemonUnavailableError", "Dataset", "InvalidOptionError", "MixtureSpec",
    "NotFoundError",
    "PeerLostError", "Pipeline", "PipelineError", "ResourceExhaustedError", "SampleId",
    "ScheduledMixtureWorkSource", "SpecMismatchError", "StaticMixtureWorkSource",
    "TokenEstimation", "Tokenizer",
    "ZephonError", "ZephonTimeoutError", "daemon_status", "inspect_checkpoint", "which",
    "write_megatron_dataset",
]
