"""Python modules generated from the repository's proto/*.proto, for tests and benches
that read, write or check Zephon's protobuf messages instead of copying them by hand.

protoc (Debian protobuf-compiler) generates them into a temporary directory on first use
and python3-protobuf imports them; both are in the Makefile's APT_PKGS. Generated once
per process: protobuf's descriptor pool refuses a second copy of the same .proto file.
"""
from __future__ import annotations

import functools
import importlib
import shutil
import subprocess
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@functools.cache
def load() -> types.SimpleNamespace:
    """The generated modules: .spec, .checkpoint and .zephon (proto/<name>_pb2)."""
    protos = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "proto").glob("*.proto"))
    if shutil.which("protoc") is None:
        raise RuntimeError("protoc not found: install Debian's protobuf-compiler (`make setup`)")
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        raise RuntimeError("python3-protobuf is not installed (`make setup` installs it)")
    out = Path(tempfile.mkdtemp(prefix="zephon-proto-py-"))
    try:
        subprocess.run(["protoc", f"--proto_path={REPO}", f"--python_out={out}", *protos],
                       check=True, capture_output=True, text=True)
        # The generated code imports its dependencies as `proto.<name>_pb2`.
        sys.path.insert(0, str(out))
        try:
            modules = {Path(p).stem: importlib.import_module(f"proto.{Path(p).stem}_pb2")
                       for p in protos}
        finally:
            sys.path.remove(str(out))
    finally:
        shutil.rmtree(out, ignore_errors=True)  # imported: the files are no longer needed
    return types.SimpleNamespace(**modules)
