"""Network namespaces for multi-node tests: one namespace per simulated node, joined by a
bridge in a hub namespace, so daemons reach each other by real (non-loopback) addresses.

Everything lives in namespaces this module creates (nothing is added to the caller's
namespace), with addresses from 10.213.<net>.0/24 that exist only inside them. Unix
sockets and /dev/shm are not network-scoped: trainers in the test process still attach
to daemons running inside the namespaces.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import uuid


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (`ip`) is not installed"
    probe = f"ztp{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class NetnsCluster:
    """`count` node namespaces on one bridge; node i has address 10.213.<net>.<i+2>."""

    def __init__(self, count: int, net: int = 7):
        tag = uuid.uuid4().hex[:6]
        self.hub = f"zth{tag}"
        self.nodes = [f"ztn{tag}{i}" for i in range(count)]
        self.addresses = [f"10.213.{net}.{i + 2}" for i in range(count)]
        self._created: list[str] = []
        try:
            self._build(tag)
        except Exception:
            self.close()
            raise

    def _build(self, tag: str) -> None:
        _ip("netns", "add", self.hub)
        self._created.append(self.hub)
        _ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.hub, "link", "set", "br0", "up")
        for i, (ns, address) in enumerate(zip(self.nodes, self.addresses)):
            _ip("netns", "add", ns)
            self._created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            host_end, node_end = f"zv{tag}{i}h", f"zv{tag}{i}n"
            _ip("-n", self.hub, "link", "add", host_end, "type", "veth", "peer", "name",
                node_end, "netns", ns)
            _ip("-n", self.hub, "link", "set", host_end, "master", "br0")
            _ip("-n", self.hub, "link", "set", host_end, "up")
            _ip("-n", ns, "addr", "add", f"{address}/24", "dev", node_end)
            _ip("-n", ns, "link", "set", node_end, "up")

    def wrapper(self, i: int) -> list[str]:
        """Command prefix that runs a program inside node i's namespace."""
        return ["ip", "netns", "exec", self.nodes[i]]

    def close(self) -> None:
        for ns in reversed(self._created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        self._created.clear()
