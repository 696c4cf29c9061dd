"""CUDA, through torch, for ``Batch.to_training(device=..., pin_memory=True)``: the only
module that touches it, so tests can stand in for a GPU where there is none.

Pinning registers a ring mapping (read-only in the trainer) with ``cudaHostRegister``, once
per mapping, so tensors viewing the ring are page-locked as they are and a host-to-device
copy from them is asynchronous without a staging copy. Where the registration is refused
(an old driver without read-only registration, a locked-memory limit), pinning falls back
to copying each tensor into pinned memory. torch is imported on use only.
"""
from __future__ import annotations

from typing import Any, Optional

# cudaHostRegister flags (cuda_runtime_api.h): the ring is mapped PROT_READ in a trainer,
# which CUDA registers only as read-only memory (CUDA >= 11.1).
_REGISTER_PORTABLE = 0x01
_REGISTER_READ_ONLY = 0x08


def available() -> bool:
    """True when torch is importable and sees a CUDA device."""
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def register_host(base: int, size: int) -> Optional[str]:
    """Page-locks [base, base + size) for CUDA (all devices). None on success, else why
    not (the caller then pins by copying)."""
    import torch
    cudart = torch.cuda.cudart()
    register = getattr(cudart, "cudaHostRegister", None)
    if register is None:
        return "this torch build does not expose cudaHostRegister"
    code = register(base, size, _REGISTER_PORTABLE | _REGISTER_READ_ONLY)
    if int(code) != 0:
        return f"cudaHostRegister returned CUDA error {int(code)}"
    return None


def unregister_host(base: int) -> None:
    """Undoes register_host; called before the mapping is unmapped."""
    import torch
    torch.cuda.cudart().cudaHostUnregister(base)


def pinned_copy(tensor: Any) -> Any:
    """A copy of a CPU tensor in page-locked memory."""
    return tensor.pin_memory()


def to_device(tensor: Any, device: Any, non_blocking: bool) -> Any:
    """``tensor.to(device, non_blocking=...)``."""
    return tensor.to(device, non_blocking=non_blocking)


def copy_done_event(device: Any) -> Any:
    """An event recorded after the copies issued so far to `device`, on that device's
    current stream (where ``tensor.to(device, non_blocking=True)`` copies; not the current
    device's, which differs when the trainer never called torch.cuda.set_device). The
    batch waits on it before its ring slot is handed back: an asynchronous copy may still
    be reading the slot."""
    import torch
    event = torch.cuda.Event()
    event.record(torch.cuda.current_stream(device))
    return event
