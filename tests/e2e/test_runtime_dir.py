"""zephond's runtime directory and the files it writes (issue 12 section 2).

A user who owns (or can write) the socket's directory plants the lock and the log as
symlinks to root-only files; a root daemon, started directly or auto-started by a
client, must refuse the directory (exit 4, naming it and the fix) or the file, and never
write through the symlink."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

import zephon
from zephon import _native

from conftest import pipeline

EXIT_ENVIRONMENT = 4
NOBODY = 65534
SECRET = "root-only: must never change\n"


def _run_zephond(*args: str, timeout: float = 20,
                 umask: int | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([_native.zephond_path(), "--metrics-address", "", *args],
                          capture_output=True, text=True, timeout=timeout,
                          preexec_fn=None if umask is None else (lambda: os.umask(umask)))


def _root_only_file(tmp_path: Path) -> Path:
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    target = secrets / "shadow"
    target.write_text(SECRET)
    target.chmod(0o600)
    return target


def _planted_dir(tmp_path: Path, target: Path, *, owner: int, mode: int) -> Path:
    """A socket directory with the lock and both log names planted as symlinks."""
    d = tmp_path / "planted"
    d.mkdir()
    for name in ("zephond.sock.lock", "zephond.sock.log", "zephond.log"):
        (d / name).symlink_to(target)
    os.chown(d, owner, -1)
    d.chmod(mode)
    return d


needs_root = pytest.mark.skipif(os.geteuid() != 0,
                                reason="needs root to give a directory to another uid")


@needs_root
def test_dir_owned_by_another_uid_is_refused_and_symlinks_are_not_followed(tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=NOBODY, mode=0o755)
    out = _run_zephond("--socket", str(d / "zephond.sock"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert str(d) in out.stderr and f"owned by uid {NOBODY}" in out.stderr, out.stderr
    assert "XDG_RUNTIME_DIR" in out.stderr, out.stderr  # the fix
    assert target.read_text() == SECRET


@needs_root
def test_log_file_in_a_directory_owned_by_another_uid_is_refused(tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=NOBODY, mode=0o755)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    out = _run_zephond("--socket", str(private / "zephond.sock"),
                       "--log-file", str(d / "zephond.log"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert str(d) in out.stderr and "--log-file" in out.stderr, out.stderr
    assert target.read_text() == SECRET


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o1777])
def test_group_or_world_writable_dir_is_refused(tmp_path, mode):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=os.geteuid(), mode=mode)
    out = _run_zephond("--socket", str(d / "zephond.sock"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert str(d) in out.stderr and f"chmod go-w {d}" in out.stderr, out.stderr
    assert target.read_text() == SECRET


def test_symlinked_lock_in_a_private_dir_is_refused(tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=os.geteuid(), mode=0o700)
    out = _run_zephond("--socket", str(d / "zephond.sock"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert "zephond.sock.lock" in out.stderr and "symlink" in out.stderr, out.stderr
    assert target.read_text() == SECRET


def test_symlinked_log_file_is_refused_not_followed(tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=os.geteuid(), mode=0o700)
    out = _run_zephond("--socket", str(tmp_path / "sock" / "zephond.sock"),
                       "--log-file", str(d / "zephond.log"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert str(d / "zephond.log") in out.stderr and "symlink" in out.stderr, out.stderr
    assert target.read_text() == SECRET


def test_hard_link_log_file_is_refused(tmp_path):
    target = _root_only_file(tmp_path)
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o700)
    os.link(target, logs / "zephond.log")
    out = _run_zephond("--socket", str(tmp_path / "sock" / "zephond.sock"),
                       "--log-file", str(logs / "zephond.log"), "--idle-exit-s", "1")
    assert out.returncode == EXIT_ENVIRONMENT, (out.returncode, out.stderr)
    assert "hard links" in out.stderr, out.stderr
    assert target.read_text() == SECRET


def test_created_runtime_dir_is_0700_and_log_0600(tmp_path):
    sock_dir = tmp_path / "run" / "zephon"
    log = tmp_path / "zephond.log"
    out = _run_zephond("--socket", str(sock_dir / "zephond.sock"), "--log-file", str(log),
                       "--idle-exit-s", "0.3")
    assert out.returncode == 0, out.stderr + log.read_text()
    assert sock_dir.stat().st_mode & 0o7777 == 0o700
    assert log.stat().st_mode & 0o777 == 0o600
    assert (sock_dir / "zephond.sock.lock").stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("umask", [0o007, 0o002])
@pytest.mark.parametrize("log_in_socket_dir", [True, False])
def test_daemon_starts_under_a_loose_umask_and_its_dirs_are_0700(tmp_path, umask,
                                                                 log_in_socket_dir):
    """systemd's UMask=0007 (or a shell's 0002): the directories zephond creates for the
    socket and for --log-file are exactly 0700, so the private-dir check never refuses a
    directory the daemon itself just made, even when the log lives in the socket's."""
    sock_dir = tmp_path / "run" / "zephon"
    log_dir = sock_dir if log_in_socket_dir else tmp_path / "log" / "zephon"
    log = log_dir / "zephond.log"
    out = _run_zephond("--socket", str(sock_dir / "zephond.sock"), "--log-file", str(log),
                       "--idle-exit-s", "0.3", umask=umask)
    assert out.returncode == 0, out.stderr + (log.read_text() if log.exists() else "")
    assert sock_dir.stat().st_mode & 0o7777 == 0o700
    assert log_dir.stat().st_mode & 0o7777 == 0o700
    assert log.stat().st_mode & 0o777 == 0o600


def test_unknown_shm_group_exits_2_before_creating_the_socket_dir(tmp_path):
    sock_dir = tmp_path / "run" / "zephon"
    log = tmp_path / "log" / "zephond.log"
    out = _run_zephond("--socket", str(sock_dir / "zephond.sock"), "--log-file", str(log),
                       "--shm-group", "zephon-no-such-group", "--idle-exit-s", "0.3")
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "--shm-group=zephon-no-such-group: no such group" in out.stderr, out.stderr
    assert not (tmp_path / "run").exists(), "a directory was created before the group check"
    assert not (tmp_path / "log").exists(), "the log was opened before the group check"


@needs_root
def test_client_autostart_refuses_a_foreign_dir_and_starts_nothing(corpus, tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=NOBODY, mode=0o755)
    p = pipeline(corpus, str(d / "zephond.sock"), attach_timeout_s=10)
    with pytest.raises(zephon.ZephonError) as raised:
        next(iter(p))
    assert str(d) in str(raised.value) and f"owned by uid {NOBODY}" in str(raised.value)
    assert target.read_text() == SECRET


def test_client_autostart_never_logs_through_a_planted_symlink(corpus, tmp_path):
    target = _root_only_file(tmp_path)
    d = _planted_dir(tmp_path, target, owner=os.geteuid(), mode=0o700)
    (d / "zephond.sock.lock").unlink()  # only the spawn log is planted
    p = pipeline(corpus, str(d / "zephond.sock"), attach_timeout_s=10)
    with pytest.raises(zephon.ZephonError) as raised:
        next(iter(p))
    assert "zephond.sock.log" in str(raised.value) and "symlink" in str(raised.value)
    assert target.read_text() == SECRET
    assert not (d / "zephond.sock.lock").exists(), "a daemon was started anyway"
