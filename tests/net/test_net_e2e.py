"""Real processes over HTTPS on 127.0.0.1: uvicorn, three owners, the user; SIGKILL and restart; 200 owners."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from dpdpca.cli import main
from dpdpca.net.client import ProxyClient, ProxyRefused, upload_shares
from dpdpca.net.launch import ServerProcess, free_port, throwaway_tls, write_proxy_toml
from dpdpca.protocol import DataOwner, DataUser, ProtocolParams
from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring

pytest.importorskip("uvicorn")
pytest.importorskip("trustme")

KEY = ["--key-bits", "768", "--insecure-test-key"]


def _cli(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dpdpca.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _done(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out


@pytest.mark.slow
def test_owners_and_user_as_processes_with_a_proxy_killed_and_restarted(tmp_path, rows_for):
    keys, ids = tmp_path / "keys", tmp_path / "ids"
    assert main(["keygen", "--out-dir", str(keys), *KEY, "--release", "any", "--max-owners", "3", "--max-rows-per-owner", "50",
                 "--features", "4"]) == 0
    assert main(["user", "identity", "--out-dir", str(ids)]) == 0
    rows = {"1": 30, "2": 12, "3": 25}
    for oid in rows:
        assert main(["owner", "keygen", "--owner-id", oid, "--out-dir", str(ids)]) == 0
    owners = {oid: OwnerIdentity.load(ids / f"{oid}.identity.json") for oid in rows}
    user = OwnerIdentity.load(ids / "user.identity.json")
    tls = throwaway_tls(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    # The proxy finishes when the user asks, so the kill below lands between collection and finish.
    config = write_proxy_toml(tmp_path / "proxy.toml", public=keys / "public.json", owners=owners, user=user,
                              tls=tls, port=port, insecure_test_key=True, state_dir=tmp_path / "state", release="on-request",
                              release_mode="centred")  # its status shows N, which the centred release makes public
    for oid, n in rows.items():
        np.savetxt(tmp_path / f"{oid}.csv", rows_for(int(oid), n=n, d=4), delimiter=",")
    watcher = ProxyClient(url, user, "user", ca_cert=tls.ca_cert)
    server = ServerProcess(config, url).start(ready_client=watcher)

    def share(oid: str) -> subprocess.Popen:
        return _cli("owner", "share", "--public", str(keys / "public.json"), "--identity",
                    str(ids / f"{oid}.identity.json"), "--data", str(tmp_path / f"{oid}.csv"), "--insecure-test-key",
                    "--release", "centred",  # the release this service is configured for
                    "--proxy", url, "--ca-cert", str(tls.ca_cert))
    try:
        for proc in [share(oid) for oid in rows]:
            assert "proxy: accepted" in _done(proc)
        for _ in range(100):
            if watcher.status()["phase"] == "closed":
                break
            time.sleep(0.1)
        assert watcher.status()["phase"] == "closed" and watcher.status()["n_rows"] == sum(rows.values())
        server.kill()  # between collection and finish
        assert sorted(json.loads((tmp_path / "state" / "state.json").read_text())["owners"]) == ["1", "2", "3"]
        server = ServerProcess(config, url).start(ready_client=watcher)
        assert watcher.status()["phase"] == "closed" and watcher.status()["accepted"] == 3
        # A fresh encryption is a different share under the same id: refused, nothing changes.
        retry = share("1")
        out, err = retry.communicate(timeout=300)
        assert retry.returncode != 0 and "409 conflict" in err and "Traceback" not in err
        user_proc = _cli("user", "finish", "--insecure-test-key", "--private", str(keys / "private.json"), "--owner-keys",
                         str(ids / "1.verify.json"), "--owner-keys", str(ids / "2.verify.json"), "--owner-keys",
                         str(ids / "3.verify.json"), "--components", "2", "--out", str(tmp_path / "pcs.npz"),
                         "--proxy", url, "--identity", str(ids / "user.identity.json"), "--ca-cert",
                         str(tls.ca_cert), "--json")
        summary = json.loads(_done(user_proc))
        assert summary["n_rows"] == sum(rows.values())
        assert summary["components_shape"] == [4, 2]
        assert np.load(tmp_path / "pcs.npz")["components"].shape == (4, 2)
        assert watcher.status()["phase"] == "released"
        released = watcher.result()
        server.kill()  # after the release: a restart serves the same bytes, it never draws noise again
        server = ServerProcess(config, url).start(ready_client=watcher)
        assert watcher.result() == released
    finally:
        watcher.close()
        code = server.stop()
    assert code in (0, -signal.SIGTERM)


@pytest.mark.slow
def test_two_hundred_owners_at_once_are_each_counted_once(tmp_path, net_keypair, rows_for):
    pk, sk = net_keypair
    n_owners, n_rows = 200, 3
    params = ProtocolParams.create(pk, release="any", max_owners=n_owners, max_rows_per_owner=8, d=2)
    (tmp_path / "public.json").write_text(json.dumps(params.to_json()))
    ids = [str(i) for i in range(1, n_owners + 1)]
    owners = {oid: OwnerIdentity.generate(oid) for oid in ids}
    user = OwnerIdentity.generate("user")
    tls = throwaway_tls(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config = write_proxy_toml(tmp_path / "proxy.toml", public=tmp_path / "public.json", owners=owners, user=user,
                              tls=tls, port=port, insecure_test_key=True, state_dir=tmp_path / "state", release_mode="centred")
    shares = {oid: DataOwner(params, owners[oid], insecure_test_key=True, release="centred").share(rows_for(int(oid), n=n_rows, d=2))
              for oid in ids}
    retried = ids[::4]  # 50 owners send twice, at the same time as everyone else
    uploads = [(owners[o], shares[o]) for o in ids] + [(owners[o], shares[o]) for o in retried]
    watcher = ProxyClient(url, user, "user", ca_cert=tls.ca_cert)
    server = ServerProcess(config, url).start(ready_client=watcher)
    try:
        codes = asyncio.run(upload_shares(url, uploads, ca_cert=tls.ca_cert, concurrency=len(uploads)))
        assert sorted(set(codes)) == [200, 201]
        assert codes.count(201) == n_owners and codes.count(200) == len(retried)
        status = watcher.wait_released(timeout_s=120, poll_s=0.2)
        assert status["phase"] == "released" and status["accepted"] == n_owners
        assert status["n_rows"] == n_owners * n_rows
        # The aggregate holds every share once: the user's decryption checks N against the signed counts.
        keyring = OwnerKeyring.from_identities(owners.values())
        res = DataUser(sk, params, owner_keys=keyring).finish(watcher.result(), n_components=1)
        assert res.extra["n_rows"] == n_owners * n_rows and len(res.extra["owners"]) == n_owners
    finally:
        watcher.close()
        assert server.stop() in (0, -signal.SIGTERM)
    assert len(list((tmp_path / "state" / "shares").glob("*.msg"))) == n_owners


def test_a_service_with_a_budget_refuses_a_second_sessions_release_past_it(tmp_path, rows_for):
    """Two sessions share the service's budget ledger: the second release would pass it and is refused
    over HTTPS before any noise is drawn; nothing is released, claimed or decrypted."""
    ids = tmp_path / "ids"
    assert main(["user", "identity", "--out-dir", str(ids)]) == 0
    assert main(["owner", "keygen", "--owner-id", "1", "--out-dir", str(ids)]) == 0
    owner = OwnerIdentity.load(ids / "1.identity.json")
    user = OwnerIdentity.load(ids / "user.identity.json")
    tls = throwaway_tls(tmp_path)
    budget_ledger = tmp_path / "privacy-ledger.json"
    answers = []
    for session in ("a", "b"):
        keys = tmp_path / f"keys-{session}"
        assert main(["keygen", "--out-dir", str(keys), *KEY, "--max-owners", "1", "--max-rows-per-owner", "50",
                     "--features", "3"]) == 0
        params = ProtocolParams.from_json(json.loads((keys / "public.json").read_text()), insecure_test_key=True)
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        config = write_proxy_toml(tmp_path / f"proxy-{session}.toml", public=keys / "public.json",
                                  owners={"1": owner}, user=user, tls=tls, port=port,
                                  insecure_test_key=True, state_dir=tmp_path / f"state-{session}", release="on-request",
                                  budget=(1.5, 1e-5), budget_ledger=budget_ledger)
        watcher = ProxyClient(url, user, "user", ca_cert=tls.ca_cert)
        server = ServerProcess(config, url).start(ready_client=watcher)
        try:
            share = DataOwner(params, owner, insecure_test_key=True).share(rows_for(7, n=20, d=3))
            client = ProxyClient(url, owner, "owner:1", ca_cert=tls.ca_cert)
            assert client.post_share("1", share)["status"] == "accepted"
            client.close()
            try:
                answers.append(("released", watcher.fetch_result(timeout_s=60, poll_s=0.1)))
            except ProxyRefused as exc:
                answers.append((exc.status, str(exc)))
                assert exc.code == 403 and watcher.status()["refused"]
        finally:
            watcher.close()
            server.stop()
    assert answers[0][0] == "released"
    assert answers[1][0] == "refused" and "release must keep the ledger" in answers[1][1]
    entries = json.loads(budget_ledger.read_text())["entries"]
    assert len(entries) == 1 and entries[0]["cost"]["epsilon"] == 1.0  # the second was never recorded
    assert not (tmp_path / "state-b" / "result.msg").exists()  # nothing left the proxy
    assert not (tmp_path / "state-b" / "ledger.json").exists() or \
        "releases" not in (tmp_path / "state-b" / "ledger.json").read_text() or \
        json.loads((tmp_path / "state-b" / "ledger.json").read_text())["dpdpca_release_ledger"]["releases"] == {}


def _gone(pid: int) -> bool:
    """No such process, or a zombie waiting for whoever adopted it: it serves nothing either way."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_proxy_service_started_by_a_killed_process_stops_too(tmp_path):
    """A benchmark killed outright (SIGKILL: no finally runs) must not leave its proxy service serving."""
    import socket

    keys, ids = tmp_path / "keys", tmp_path / "ids"
    assert main(["keygen", "--out-dir", str(keys), *KEY, "--max-owners", "2", "--max-rows-per-owner", "5",
                 "--features", "2"]) == 0
    assert main(["user", "identity", "--out-dir", str(ids)]) == 0
    assert main(["owner", "keygen", "--owner-id", "1", "--out-dir", str(ids)]) == 0
    tls = throwaway_tls(tmp_path)
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    config = write_proxy_toml(tmp_path / "proxy.toml", public=keys / "public.json",
                              owners={"1": OwnerIdentity.load(ids / "1.identity.json")},
                              user=OwnerIdentity.load(ids / "user.identity.json"), tls=tls, port=port,
                              insecure_test_key=True, state_dir=tmp_path / "state")
    starter = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\n"
        "from dpdpca.net.client import ProxyClient\n"
        "from dpdpca.net.launch import ServerProcess\n"
        "from dpdpca.protocol.identity import OwnerIdentity\n"
        f"user = OwnerIdentity.load({str(ids / 'user.identity.json')!r})\n"
        f"watcher = ProxyClient({url!r}, user, 'user', ca_cert={str(tls.ca_cert)!r})\n"
        f"server = ServerProcess({str(config)!r}, {url!r}).start(ready_client=watcher)\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert starter.stdout is not None
        pid = int(starter.stdout.readline())
        assert not _gone(pid)
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # it serves
    finally:
        starter.kill()
        starter.wait()
        if starter.stdout is not None:
            starter.stdout.close()
    stop = time.monotonic() + 30  # uvicorn's graceful shutdown takes at most its 5 s timeout
    while not _gone(pid) and time.monotonic() < stop:
        time.sleep(0.1)
    if not _gone(pid):
        os.kill(pid, signal.SIGKILL)  # do not leak it from the test itself
        pytest.fail(f"the proxy service {pid} outlived the process that started it")
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
