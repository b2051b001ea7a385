"""Progress on stderr (``dpdpca.progress``): its three forms, and every long command printing a line within 5 s.

The command test starts each long command as it would run under CI or ``| tee``
(stderr a pipe), waits for its first stderr line, then stops it: nothing is
run to the end.
"""

from __future__ import annotations

import io
import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dpdpca.progress import Progress, format_seconds

ROOT = Path(__file__).resolve().parents[1]


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_pipe_form_is_one_line_per_step_with_eta_after_a_silent_start():
    out, clock = io.StringIO(), _Clock()
    with Progress("bench demo", total=4, stream=out, clock=clock, announce_after=2.0) as tick:
        clock.now = 1.0
        tick("keygen")  # within the silent start: held back
        tick.phase("encrypting")
        assert out.getvalue() == ""
        clock.now = 2.5
        tick("owner 1")  # past it: the start line names the last step, then this one
        clock.now = 5.0
        tick("owner 2")
    lines = out.getvalue().splitlines()
    assert lines[0] == "dpdpca bench demo: started, 4 steps"
    assert lines[1] == "dpdpca bench demo: [2/4] owner 1 (2 s, ETA 2 s)"
    assert lines[2] == "dpdpca bench demo: [3/4] owner 2 (5 s, ETA 2 s)"
    assert lines[3] == "dpdpca bench demo: done in 5 s"
    assert "\r" not in out.getvalue()


def test_terminal_form_is_one_bar_with_phase_and_eta():
    out, clock = _Tty(), _Clock()
    with Progress("run", total=10, stream=out, clock=clock, announce_after=0) as tick:
        clock.now = 3.0
        tick("owner 3")
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("dpdpca run: done in 3 s\n")  # the bar is redrawn in place
    assert "\r\x1b[K" in text and "[##----------------" in text and "1/10 owner 3" in text and "ETA 27 s" in text


def test_quiet_prints_nothing_and_a_failure_in_the_silent_start_prints_nothing():
    out = io.StringIO()
    with Progress("compare", total=3, stream=out, quiet=True, announce_after=0) as tick:
        tick("a")
        tick.phase("b")
    assert out.getvalue() == ""
    with pytest.raises(ValueError), Progress("run", total=3, stream=out) as tick:
        tick("keygen")
        raise ValueError("bad input")  # the CLI prints its one error line; the progress adds nothing
    assert out.getvalue() == ""


def test_a_started_line_appears_by_itself_after_the_delay():
    out = io.StringIO()
    with Progress("bench crypto", total=6, stream=out, announce_after=0.05) as tick:
        tick.phase("generating the key")
        time.sleep(0.5)  # a long first step: the timer announces it
        assert out.getvalue() == ("dpdpca bench crypto: started, 6 steps\n"
                                  "dpdpca bench crypto: generating the key ...\n")


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (59.4, "59 s"), (61, "1 min 01 s"), (3725, "1 h 02 min")])
def test_format_seconds(seconds, text):
    assert format_seconds(seconds) == text


# -- every long command, with stderr a pipe ------------------------------------------------------------------

def _first_stderr_lines(commands: dict[str, list[str]], cwd: Path, limit_s: float, at_once: int = 3
                        ) -> dict[str, tuple[str, float, int | None]]:
    """Start each ``dpdpca ARGV`` (``at_once`` at a time) with stderr a pipe; return its first stderr line,
    when it came (seconds from the process start) and, where stderr closed with no line, the exit status of a
    command that had already finished; then stop it, with every process it started (its own process group),
    and keep what it left in temporary directories under ``cwd``, which the test's own tmp path holds."""
    tmp = cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp))
    names = list(commands)
    out: dict[str, tuple[str, float, int | None]] = {}
    for lo in range(0, len(names), at_once):
        procs = {}
        try:
            for name in names[lo:lo + at_once]:
                procs[name] = (time.monotonic(), subprocess.Popen(
                    [sys.executable, "-m", "dpdpca.cli", *commands[name]], cwd=cwd, env=env,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True))
            for name, (t0, proc) in procs.items():
                assert proc.stderr is not None
                ready, _, _ = select.select([proc.stderr], [], [], max(0.0, t0 + limit_s - time.monotonic()))
                line = proc.stderr.readline() if ready else ""
                seconds = time.monotonic() - t0
                status = None
                if ready and not line:  # end of stderr: the command finished before printing any line
                    try:
                        status = proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        status = None
                out[name] = (line, seconds, status)
        finally:
            for _, proc in procs.values():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the command and what it started (a proxy, pool workers)
                except ProcessLookupError:
                    pass
                proc.wait()
                if proc.stderr is not None:
                    proc.stderr.close()
    return out


@pytest.fixture(scope="module")
def party_files(tmp_path_factory):
    """A data user's key, one owner's identity and data, a user identity and a CA file: enough to start the
    per-role commands against a proxy address where nothing listens yet (they wait and retry)."""
    from dpdpca.cli import main
    from dpdpca.net.launch import free_port, throwaway_tls

    root = tmp_path_factory.mktemp("parties")
    assert main(["keygen", "--out-dir", str(root / "keys"), "--key-bits", "1024", "--insecure-test-key"]) == 0
    assert main(["owner", "keygen", "--owner-id", "alice", "--out-dir", str(root / "ids")]) == 0
    assert main(["user", "identity", "--out-dir", str(root / "ids")]) == 0
    X = np.random.default_rng(0).uniform(0, 0.1, size=(30, 4))
    np.savetxt(root / "a.csv", X, delimiter=",")
    tls = throwaway_tls(root)
    return {"root": root, "url": f"https://127.0.0.1:{free_port()}", "ca": str(tls.ca_cert)}


def _commands(files: dict) -> dict[str, list[str]]:
    root, url, ca = files["root"], files["url"], files["ca"]
    return {
        "run": ["run"],
        "compare": ["compare", "--dataset", "digits", "--sites", "5", "--components", "5", "--epsilon", "1",
                    "--delta", "1e-5", "--runs", "50"],
        "tensor": ["tensor", "--model", "mog", "--dim", "10", "--components", "3", "--samples-per-site",
                   "200000", "--epsilon", "1", "--runs", "20"],
        "owner share": ["owner", "share", "--public", str(root / "keys" / "public.json"), "--identity",
                        str(root / "ids" / "alice.identity.json"), "--data", str(root / "a.csv"),
                        "--insecure-test-key", "--proxy", url, "--ca-cert", ca],
        "user finish": ["user", "finish", "--insecure-test-key", "--private", str(root / "keys" / "private.json"), "--owner-keys",
                        str(root / "ids" / "alice.verify.json"), "--components", "1", "--out",
                        str(root / "pcs.npz"), "--proxy", url, "--identity", str(root / "ids" / "user.identity.json"),
                        "--ca-cert", ca],
        **{f"bench {name}": ["bench", name, *extra] for name, extra in (
            ("crypto", ["--quick"]), ("dp", []), ("protocol", ["--quick"]), ("baselines", ["--quick"]),
            ("tensor", ["--quick", "--out", str(root / "bench-tensor")]),
            ("timing", ["--quick", "--key-bits", "1024", "--insecure-test-key"]),
            ("intake", ["--key-bits", "1024", "--insecure-test-key"]),
            ("utility", ["--quick"]), ("network", ["--quick"]), ("scale", ["--quick"]),
            ("streaming", ["--quick"]), ("proofs", []), ("strangers", ["--quick"]))},
    }


LONG_COMMANDS = ["run", "compare", "tensor", "owner share", "user finish", "bench crypto", "bench dp",
                 "bench protocol", "bench baselines", "bench tensor", "bench timing", "bench intake", "bench utility",
                 "bench network", "bench scale", "bench streaming", "bench proofs", "bench strangers"]


@pytest.fixture(scope="module")
def first_lines(party_files):
    pytest.importorskip("starlette")
    pytest.importorskip("matplotlib")  # bench tensor and bench utility draw figures
    # Five seconds from the process start, imports included; a machine loaded past its cores gets more.
    loaded = os.getloadavg()[0] > (os.cpu_count() or 1)
    return _first_stderr_lines(_commands(party_files), party_files["root"], limit_s=20.0 if loaded else 5.0)


@pytest.mark.slow
@pytest.mark.parametrize("name", LONG_COMMANDS)
def test_every_long_command_prints_a_progress_line_within_five_seconds_on_a_pipe(name, first_lines):
    line, seconds, status = first_lines[name]
    if not line and status == 0:  # done, successfully, within the limit: nothing was long enough to report
        return
    assert line.startswith(f"dpdpca {name}: "), (name, line, seconds, status)
    assert "Traceback" not in line and "error" not in line


def test_quiet_run_prints_no_progress_and_json_stays_one_object(tmp_path):
    X = np.random.default_rng(1).uniform(0, 0.2, size=(60, 3))
    np.save(tmp_path / "x.npy", X)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "dpdpca.cli", "run", "--data", str(tmp_path / "x.npy"),
                           "--owners", "2", "--components", "1", "--key-bits", "768", "--insecure-test-key",
                           "--json", "--quiet"], check=False, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "dpdpca run:" not in proc.stderr
    assert json.loads(proc.stdout)["owners"] == 2
