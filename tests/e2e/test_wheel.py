"""The Python package installs like the packages trainers use (issue 18): a platform wheel
built offline with Debian's setuptools bundles the native parts, installs into a fresh
virtualenv, and runs the README's example from another directory with no checkout on
its path; ``python -m zephon --version`` / ``doctor`` report what they find."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "client" / "python"


def readme_block(header: str) -> str:
    """The first ```python block after `header` in the README."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(header):]
    return re.search(r"```python\n(.*?)```", after, re.S).group(1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    if not (PACKAGE / "zephon" / "_native" / "zephond").is_file():
        pytest.skip("run `make build` first (the wheel bundles zephond)")
    src = tmp_path_factory.mktemp("wheel-src") / "python"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                "*.egg-info"))
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps",
                    "--no-index", "-q", "-w", str(out), str(src)], check=True, timeout=300)
    (built,) = out.glob("zephon-*.whl")
    return built


def test_the_wheel_is_a_platform_wheel_with_the_native_parts(wheel):
    assert re.fullmatch(r"zephon-[\d.]+-cp3\d+-cp3\d+-linux_\w+\.whl", wheel.name), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    for part in ("libzephon_c.so", "libzephon_spm_shim.so", "zephond", "zephonctl"):
        assert f"zephon/_native/{part}" in names
    assert modes["zephon/_native/zephond"] & 0o111, "zephond stays executable"
    assert "zephon/py.typed" in names and "zephon/types.py" in names


def test_installed_into_a_venv_it_runs_the_readme_example_elsewhere(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "--no-index", "--no-deps", "-q", str(wheel)],
                   check=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ZEPHON_LIB", "ZEPHOND")}
    env["ZEPHON_SOCKET"] = str(tmp_path / "sock" / "zephond.sock")
    env["ZEPHON_IDLE_EXIT_S"] = "5"

    def run(*args):
        return subprocess.run([py, *args], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)

    where = run("-c", "import zephon; print(zephon.__file__, zephon.__version__)")
    assert where.returncode == 0, where.stderr
    assert str(venv) in where.stdout and str(ROOT) not in where.stdout
    version = run("-m", "zephon", "--version")
    assert version.returncode == 0 and version.stdout.startswith("zephon "), version
    example = run("-c", readme_block("## Coming from the Python Zephon"))
    assert example.returncode == 0, example.stderr
    assert "upstream-style batch: (2, 65)" in example.stdout
    doctor = run("-m", "zephon", "doctor")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    lines = doctor.stdout.splitlines()
    assert any(l.startswith("ok   native library") and str(venv) in l for l in lines), lines
    assert any(l.startswith("ok   zephond") and str(venv) in l for l in lines), lines
    assert any(l.startswith("ok   daemon") for l in lines), "the example's daemon answers"
    assert any("shared memory" in l for l in lines)
    assert any(l.startswith("ok   ring ABI") for l in lines), lines


def test_doctor_fails_on_a_daemon_of_another_ring_layout():
    from zephon import _native
    from zephon.__main__ import _ring_abi_check
    ours = int(_native.LIB.zephon_ring_abi_major())
    status, what, detail = _ring_abi_check({"ring_abi_major": ours + 1, "ring_abi_minor": 0,
                                            "pid": 4242})
    assert (status, what) == ("FAIL", "ring ABI")
    assert f"layout {ours + 1}.0" in detail and "kill 4242" in detail
    assert _ring_abi_check({"ring_abi_major": ours, "ring_abi_minor": 3})[0] == "ok"
    assert _ring_abi_check({"pid": 1})[0] == "warn", "an older daemon reports no layout"


def test_doctor_fails_naming_the_fix_for_a_socket_directory_of_others(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    env = dict(os.environ, PYTHONPATH=str(PACKAGE))
    out = subprocess.run([sys.executable, "-m", "zephon", "doctor", "--socket",
                          str(shared / "zephond.sock")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1, out.stdout
    assert "FAIL socket directory" in out.stdout and "not 0700" in out.stdout
