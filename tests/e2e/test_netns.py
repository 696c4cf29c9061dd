"""The multi-daemon peer scenario with each daemon in its own network namespace (issue 12):
peers reach each other by real addresses over a bridge, with mutual TLS and the shared
secret, not over loopback. Skipped, with the reason, where namespaces are unavailable."""
from __future__ import annotations

import os

import pytest

from netns import NetnsCluster, unavailable_reason
from test_checkpoint import STEPS, Job, make_certs
from zephond_process import Daemon, cluster_secret_file

_REASON = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(_REASON is not None, reason=f"network namespaces: {_REASON}"),
    pytest.mark.skipif(os.system("command -v openssl >/dev/null") != 0, reason="needs openssl"),
]
PEER_PORT = 7070


@pytest.fixture
def cluster():
    c = NetnsCluster(3)
    yield c
    c.close()


def start_nodes(cluster, tmp_path, name, certs, count=3) -> list[Daemon]:
    daemons = []
    for i in range(count):
        tls = ["--peer-tls-cert", certs["cert"], "--peer-tls-key", certs["key"],
               "--peer-tls-ca", certs["ca"]]
        daemons.append(Daemon(tmp_path / f"{name}{i}",
                              ["--peer-address", f"{cluster.addresses[i]}:{PEER_PORT}",
                               "--peer-secret-file", cluster_secret_file(),
                               "--metrics-address", "", *tls],
                              wrapper=cluster.wrapper(i)))
    return daemons


def stop_all(daemons):
    for d in daemons:
        assert d.stop() == 0, d.log.read_text()


def test_elastic_resume_across_three_namespaced_daemons(corpus, cluster, tmp_path):
    san = ",".join(f"IP:{a}" for a in cluster.addresses)
    certs = make_certs(tmp_path, san=san)
    agg = tmp_path / "agg"
    reference = Daemon(tmp_path / "reference", peer=False)
    job = Job(corpus, [reference], dp=1, peers=1, run_id="reference", agg=agg)
    want = [job.step() for _ in range(STEPS)]
    job.close()
    assert reference.stop() == 0

    daemons = start_nodes(cluster, tmp_path, "a", certs)
    for d, address in zip(daemons, cluster.addresses):
        assert d.status()["peer_address"] == f"{address}:{PEER_PORT}"
    job = Job(corpus, daemons, dp=4, peers=2, run_id="netns", agg=agg)
    for s in range(3):
        assert job.step() == want[s], f"step {s}"
    states = job.checkpoint()
    assert all(s == states[0] for s in states)
    assert f"address={cluster.addresses[0]}:{PEER_PORT}" in (agg / "netns" / "leader").read_text()
    job.close()
    stop_all(daemons)

    fresh = start_nodes(cluster, tmp_path, "b", certs)
    resumed = Job(corpus, fresh, dp=2, peers=2, run_id="netns", agg=agg, restore=states[0])
    for s in range(3, STEPS):
        assert resumed.step() == want[s], f"resumed: step {s}"
    resumed.close()
    stop_all(fresh)


def test_a_namespaced_follower_with_a_foreign_certificate_is_refused(corpus, cluster, tmp_path):
    san = ",".join(f"IP:{a}" for a in cluster.addresses)
    (tmp_path / "good").mkdir()
    (tmp_path / "rogue").mkdir()
    good = make_certs(tmp_path / "good", san=san)
    rogue = make_certs(tmp_path / "rogue", san=san)  # another CA
    leader = start_nodes(cluster, tmp_path, "lead", good, count=1)[0]
    intruder = Daemon(tmp_path / "intruder",
                      ["--peer-address", f"{cluster.addresses[1]}:{PEER_PORT}",
                       "--peer-secret-file", cluster_secret_file(), "--metrics-address", "",
                       "--peer-tls-cert", rogue["cert"], "--peer-tls-key", rogue["key"],
                       "--peer-tls-ca", rogue["ca"]],
                      wrapper=cluster.wrapper(1))
    agg = tmp_path / "agg"
    job = Job(corpus, [leader, intruder], dp=2, peers=1, run_id="foreign", agg=agg, timeout=3.0)
    try:
        job.step()
        job.checkpoint_fails()
        assert not list((agg / "foreign").glob("checkpoint-*"))
    finally:
        job.close()
        stop_all([leader, intruder])
