"""The C ABI boundary (client/c_api.h) against the Python bindings (zephon/_native.py):
the version check at load, and the ctypes mirrors of every struct against the header's
layout as a C compiler lays it out. No daemon needed."""
from __future__ import annotations

import ctypes
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zephon import _native

REPO = Path(__file__).resolve().parents[2]
HEADER = REPO / "client" / "c_api.h"


def compile_c(source: str, out: Path, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Werror", f"-I{REPO}", *flags, str(src),
                    "-o", str(out)], check=True, capture_output=True, text=True)
    return out


def header_structs(header: Path = HEADER) -> dict[str, list[str]]:
    """{typedef name: [field names in order]} of every struct with a body in the header,
    read from it preprocessed (comments gone, macros expanded; what it includes left out
    by the line markers)."""
    preprocessed = subprocess.run(["gcc", "-E", "-x", "c", str(header)], check=True,
                                  capture_output=True, text=True).stdout
    kept, current = [], None
    for line in preprocessed.splitlines():
        marker = re.match(r'# \d+ "(.*)"', line)
        if marker:
            current = marker.group(1)
        elif current == str(header):
            kept.append(line)
    text = "\n".join(kept)
    structs = {}
    for body, name in re.findall(r"typedef\s+struct\s*\w*\s*\{(.*?)\}\s*(\w+)\s*;", text,
                                 re.S):
        fields = []
        for decl in filter(None, (d.strip() for d in body.split(";"))):
            assert "," not in decl, f"{name}: one field per declaration, please: {decl!r}"
            fields.append(re.search(r"(\w+)\s*(?:\[[^\]]*\]\s*)*$", decl).group(1))
        structs[name] = fields
    return structs


def c_layout(structs: dict[str, list[str]], tmp_path: Path) -> tuple[int, dict]:
    """(ZEPHON_C_API_VERSION, {struct: (sizeof, alignof, [(field, offset, size)])}) as gcc
    lays out c_api.h."""
    lines = ['#include <stdalign.h>', '#include <stddef.h>', '#include <stdio.h>',
             '#include "client/c_api.h"', 'int main(void) {',
             '  printf("version %u\\n", (unsigned)ZEPHON_C_API_VERSION);']
    for name, fields in structs.items():
        lines.append(f'  printf("struct {name} %zu %zu\\n", sizeof({name}), alignof({name}));')
        for f in fields:
            lines.append(f'  printf("field {name} {f} %zu %zu\\n", offsetof({name}, {f}), '
                         f'sizeof((({name}*)0)->{f}));')
    lines += ["  return 0;", "}"]
    exe = compile_c("\n".join(lines) + "\n", tmp_path / "layout")
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    version, layout = None, {}
    for row in out.splitlines():
        kind, *rest = row.split()
        if kind == "version":
            version = int(rest[0])
        elif kind == "struct":
            layout[rest[0]] = (int(rest[1]), int(rest[2]), [])
        else:
            layout[rest[0]][2].append((rest[1], int(rest[2]), int(rest[3])))
    return version, layout


def ctypes_layout(cls) -> tuple[int, int, list]:
    return (ctypes.sizeof(cls), ctypes.alignment(cls),
            [(name, getattr(cls, name).offset, getattr(cls, name).size)
             for name, *_ in cls._fields_])


def test_every_header_struct_has_a_ctypes_mirror_with_its_layout(tmp_path):
    structs = header_structs()
    assert structs, f"found no struct in {HEADER}: the parser is out of date"
    missing = set(structs) - set(_native.C_STRUCTS)
    assert not missing, (f"c_api.h declares {sorted(missing)} but zephon/_native.py has no "
                         "ctypes mirror of it in C_STRUCTS")
    stale = set(_native.C_STRUCTS) - set(structs)
    assert not stale, f"_native.C_STRUCTS mirrors {sorted(stale)}, which c_api.h lacks"
    _, layout = c_layout(structs, tmp_path)
    for name, cls in _native.C_STRUCTS.items():
        c_size, c_align, c_fields = layout[name]
        py_size, py_align, py_fields = ctypes_layout(cls)
        assert [f[0] for f in py_fields] == [f[0] for f in c_fields], (
            f"{name}: the fields of _native.{cls.__name__} differ from c_api.h's")
        assert py_fields == c_fields, (
            f"{name}: (field, offset, size) differ: ctypes {py_fields} vs C {c_fields}")
        assert (py_size, py_align) == (c_size, c_align), (
            f"{name}: sizeof/alignof differ: ctypes {py_size}/{py_align}, C {c_size}/{c_align}")


def test_header_parser_sees_an_added_field(tmp_path):
    # The check above is only as good as the parser: a field appended to a struct of the
    # header must show up in what it reads.
    text = HEADER.read_text().replace("zephon_tensor tensors[ZEPHON_MAX_TENSORS];",
                                      "zephon_tensor tensors[ZEPHON_MAX_TENSORS];\n"
                                      "  uint64_t added_later; /* a comment */")
    assert text != HEADER.read_text(), "the zephon_batch tensors line moved; update this test"
    (tmp_path / "c_api.h").write_text(text)
    fields = header_structs(tmp_path / "c_api.h")["zephon_batch"]
    assert fields[-1] == "added_later"
    assert fields[:-1] == [f[0] for f in _native.BatchInfo._fields_]


def test_bindings_version_matches_header_and_library(tmp_path):
    version, _ = c_layout({}, tmp_path)
    assert _native.C_API_VERSION == version, (
        f"c_api.h is at ZEPHON_C_API_VERSION {version}; _native.C_API_VERSION says "
        f"{_native.C_API_VERSION}")
    assert _native.LIB.zephon_c_api_version() == version


def test_batch_info_carries_its_struct_size():
    assert _native.BatchInfo().struct_size == ctypes.sizeof(_native.BatchInfo)


def test_loading_a_library_of_another_version_names_both_and_the_fix(monkeypatch):
    library_version = _native.LIB.zephon_c_api_version()
    monkeypatch.setattr(_native, "C_API_VERSION", library_version + 1)
    with pytest.raises(ImportError) as e:
        _native._load()
    message = str(e.value)
    assert f"speaks C API version {library_version}," in message
    assert f"needs C API version {library_version + 1}" in message
    assert "make build" in message and "reinstall" in message
    assert _native.library_path() in message


def import_zephon_with(lib: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, ZEPHON_LIB=str(lib),
               PYTHONPATH=str(REPO / "client" / "python"))
    return subprocess.run([sys.executable, "-c", "import zephon"], env=env,
                          capture_output=True, text=True, timeout=60)


def test_import_refuses_a_library_of_another_version(tmp_path):
    lib = compile_c("#include <stdint.h>\nuint32_t zephon_c_api_version(void) "
                    f"{{ return {_native.C_API_VERSION + 41}; }}\n",
                    tmp_path / "libother.so", "-shared", "-fPIC")
    out = import_zephon_with(lib)
    assert out.returncode != 0
    assert (f"{lib} speaks C API version {_native.C_API_VERSION + 41}, but this zephon "
            f"Python package needs C API version {_native.C_API_VERSION}") in out.stderr


def test_import_refuses_a_library_from_before_versioning(tmp_path):
    lib = compile_c("int zephon_ring_abi_major(void) { return 2; }\n",
                    tmp_path / "libold.so", "-shared", "-fPIC")
    out = import_zephon_with(lib)
    assert out.returncode != 0
    assert "has no zephon_c_api_version(): it predates C API versioning" in out.stderr
    assert f"needs C API version {_native.C_API_VERSION}" in out.stderr
