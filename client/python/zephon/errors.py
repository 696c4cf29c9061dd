"""Exceptions raised by the Zephon client, in one place. Each carries the daemon's (or
the client's) message verbatim, naming the thing and the fix, and ``code``, the
canonical status code. All derive from :class:`ZephonError` (a RuntimeError); some also
from the builtin a caller would catch for that kind of error:

======================== ================================ ================================
exception                also a                           raised when (status code)
======================== ================================ ================================
InvalidOptionError       ValueError                       an option, argument, spec value
                                                          or checkpoint is invalid
                                                          (INVALID_ARGUMENT)
NotFoundError            FileNotFoundError                a named file or object is
                                                          missing (NOT_FOUND)
SpecMismatchError                                         the request conflicts with
                                                          state the daemon holds: another
                                                          spec for the DP group, a
                                                          checkpoint of another spec, a
                                                          second job under one run_id
                                                          (FAILED_PRECONDITION,
                                                          ALREADY_EXISTS)
PeerLostError                                             a peer rank of the DP group
                                                          died; the ring is poisoned
                                                          (ABORTED)
DaemonUnavailableError                                    zephond cannot be reached, or
                                                          shut down (UNAVAILABLE,
                                                          CANCELLED)
PipelineError                                             the pipeline failed, e.g. a
                                                          corrupt shard (INTERNAL,
                                                          DATA_LOSS)
ResourceExhaustedError                                    not enough shared memory or
                                                          ring budget (RESOURCE_EXHAUSTED)
ZephonTimeoutError       TimeoutError                     a wait passed its deadline
                                                          (DEADLINE_EXCEEDED)
======================== ================================ ================================

Warnings (mid-window checkpoints, a reused run_id, an unknown upstream option) are
``warnings.warn`` RuntimeWarning / UserWarning, filterable as usual.
"""
from __future__ import annotations

# absl / gRPC canonical status codes used by the C ABI.
CANCELLED = 1
RESOURCE_EXHAUSTED = 8
INTERNAL = 13
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNAVAILABLE = 14
DATA_LOSS = 15


class ZephonError(RuntimeError):
    """Base class. ``code`` is the canonical status code from the daemon or client."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class InvalidOptionError(ZephonError, ValueError):
    """An option, argument or spec value is invalid (e.g. dp_degree > canonical_replicas,
    a malformed tokenizer.json)."""


class NotFoundError(ZephonError, FileNotFoundError):
    """A file or directory the call names does not exist (e.g. a tokenizer path)."""


class SpecMismatchError(ZephonError):
    """The request conflicts with state the daemon holds (e.g. another spec hash for the
    same DP group), or versions disagree."""


class PeerLostError(ZephonError):
    """A peer rank of this DP group died; the ring is poisoned."""


class DaemonUnavailableError(ZephonError):
    """zephond could not be reached, stopped responding, or shut down (its ring closed)."""


class PipelineError(ZephonError):
    """zephond's pipeline failed for this DP group (e.g. a corrupt shard); the message
    names the cause."""


class ResourceExhaustedError(ZephonError):
    """Not enough shared memory (or ring budget) for the ring; the message says how much
    is needed and how to fix it."""


class ZephonTimeoutError(ZephonError, TimeoutError):
    """A wait on the daemon or the ring passed its deadline."""


_BY_CODE = {
    INVALID_ARGUMENT: InvalidOptionError,
    NOT_FOUND: NotFoundError,
    FAILED_PRECONDITION: SpecMismatchError,
    ALREADY_EXISTS: SpecMismatchError,
    ABORTED: PeerLostError,
    UNAVAILABLE: DaemonUnavailableError,
    DEADLINE_EXCEEDED: ZephonTimeoutError,
    CANCELLED: DaemonUnavailableError,
    INTERNAL: PipelineError,
    DATA_LOSS: PipelineError,
    RESOURCE_EXHAUSTED: ResourceExhaustedError,
}


def from_code(code: int, message: str) -> ZephonError:
    return _BY_CODE.get(code, ZephonError)(message, code)
