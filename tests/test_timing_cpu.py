"""Timings.measure books the calling thread's CPU time, not another thread's."""

from __future__ import annotations

import threading
import time

from dpdpca.timing import Timings


def test_a_phase_books_its_own_thread_cpu_not_a_background_threads():
    stop = threading.Event()

    def spin() -> None:  # another party's background work in the same process
        while not stop.is_set():
            sum(range(1000))

    t = Timings()
    worker = threading.Thread(target=spin, daemon=True)
    worker.start()
    try:
        with t.measure("owner:1", "encrypt"):
            time.sleep(0.3)  # this phase itself does (almost) nothing
        with t.measure("owner:1", "quantize"):
            sum(range(2_000_000))  # and this one computes
    finally:
        stop.set()
        worker.join()
    cpu = t.to_dict()["cpu_s"]["owner:1"]
    assert cpu["encrypt"] < 0.1  # process time would book the spinning thread's ~0.3 s here
    assert cpu["quantize"] > 0
