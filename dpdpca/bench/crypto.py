"""``dpdpca bench crypto``: our packed DJN layer against python-paillier, in one run.

Both libraries encrypt and decrypt the same fixed-point integers under the
same modulus in the same process; the figures that matter are the in-run
ratios.  Each ratio is taken between two measurements run back to back
(3 pairs with ``--quick``, 5 otherwise) and the median pair is reported,
which resists load from other jobs on a shared machine; the per-second rates
are the best run.  Values are packed with the slot parameters the protocol needs for
d = 784, L = 100 owners and 10**5 rows per owner, in three layouts: the
headline figures use the layout of parameters that declare the default
add/remove release (:func:`dpdpca.protocol.params.add_remove_value_bound`
with that release's noise allowance for epsilon >= 0.01, as ``dpdpca keygen
--release add-remove`` makes it); the ``*_any`` figures the wide layout that
also serves the centred release (``final_value_bound`` and
``carry_value_bound``); the ``*_plain`` figures the plain one
(``slot_value_bound``).

JSON keys: ``key_bits``, ``values`` (slots encrypted by our layer),
``phe_values``, ``phe_encrypt_values_per_s``, ``encrypt_values_per_s``,
``encrypt_ratio``, ``phe_decrypt_values_per_s``, ``decrypt_values_per_s``,
``decrypt_ratio``, ``aggregate_efficiency`` (time to add L packed arrays /
(modular multiplications x measured cost of one gmpy2 mulmod); each
aggregation is paired with a bare ``a * b % n2`` loop of the same count run
right after it, and the median of the paired ratios is reported),
``aggregate_arrays``, ``aggregate_ciphertexts``, ``mulmod_us``,
``peak_rss_mb`` (peak RSS of a fresh process encrypting the upper triangle of
a d x d matrix), ``triangle_d``, ``triangle_ciphertexts``,
``triangle_encrypt_s``, ``triangle_bytes``, ``slots_per_ciphertext``,
``slot_bits``, ``encrypt_ratio_any``, ``decrypt_ratio_any``,
``slots_per_ciphertext_any``, ``slot_bits_any``, ``slot_bound_bits``, ``carry_bound_bits`` (of the
``any`` layout), ``encrypt_ratio_plain``, ``decrypt_ratio_plain``,
``slots_per_ciphertext_plain``, ``slot_bits_plain``, ``table_build_s``, ``keygen_s``,
``packed_power_speedup`` (scalar_times_packed against a plain powmod by the
packed exponent), ``quick``; with ``--workers N > 1`` also
``parallel_workers`` and ``parallel_encrypt_speedup`` (serial time / time on a
local process pool of N workers).
"""

from __future__ import annotations

import json
import resource
import statistics
import subprocess
import sys
import time
import timeit
from typing import Any, Callable

import click
import numpy as np
import phe

from dpdpca._validation import check_int
from dpdpca.crypto import (
    EncryptedArray,
    FixedPointCodec,
    PublicKey,
    SlotLayout,
    decrypt,
    encrypt,
    generate_keypair,
    local_process_pool,
    scalar_times_packed,
    sum_arrays,
    upper_triangle_chunks,
)
from dpdpca.crypto.ciphertexts import power_mod, random_unit
from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.crypto.matrix import EncryptedSymmetricMatrix
from dpdpca.protocol.params import ProtocolParams, carry_value_bound, final_value_bound, slot_value_bound
from dpdpca.progress import Progress, quiet_option

#: Protocol sizes the slots are derived for.
D, OWNERS, ROWS_PER_OWNER = 784, 100, 10**5


def _timed(fn: Any, repeat: int = 1) -> tuple[Any, float]:
    """Result of ``fn()`` and its best wall time over ``repeat`` runs (min resists load from other jobs)."""
    best = float("inf")
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _paired(fa: Any, fb: Any, runs: int) -> tuple[Any, Any, list[float], list[float]]:
    """Run ``fa`` and ``fb`` back to back ``runs`` times; results and both lists of times.

    Ratios are taken pair by pair (both sides of a pair see about the same load
    from other jobs) and summarised by their median.
    """
    ta: list[float] = []
    tb: list[float] = []
    ra = rb = None
    for _ in range(runs):
        ra, t = _timed(fa)
        ta.append(t)
        rb, t = _timed(fb)
        tb.append(t)
    return ra, rb, ta, tb


def _throughput(pk: PublicKey, sk: Any, layout: SlotLayout, bound: int, values: list[int], phe_side: dict[str, Any],
                runs: int, suffix: str = "") -> dict[str, Any]:
    """Encrypt and decrypt ratios of one layout, each paired with phe's run on ``phe_side['values']``.

    ``values`` (a multiple of the layout's slots) must round-trip; returns the
    ``encrypt_ratio``, ``decrypt_ratio``, ``slots_per_ciphertext``,
    ``slot_bits`` keys with ``suffix``.
    """
    ppk, psk, pvals, pcts = phe_side["ppk"], phe_side["psk"], phe_side["values"], phe_side["cts"]
    _, enc, phe_enc_t, enc_t = _paired(lambda: [ppk.encrypt(v) for v in pvals],
                                       lambda: encrypt(pk, values, layout=layout, bound=bound), runs)
    _, plain, phe_dec_t, dec_t = _paired(lambda: [psk.decrypt(c) for c in pcts], lambda: decrypt(sk, enc), runs)
    if plain != values:
        raise RuntimeError("dpdpca.crypto round trip failed in the benchmark")
    n_phe = len(pvals)
    out = {
        "encrypt_ratio": statistics.median((len(values) / b) / (n_phe / a) for a, b in zip(phe_enc_t, enc_t)),
        "decrypt_ratio": statistics.median((len(values) / b) / (n_phe / a) for a, b in zip(phe_dec_t, dec_t)),
        "slots_per_ciphertext": layout.slots,
        "slot_bits": layout.slot_bits,
    }
    if not suffix:
        out.update({"phe_encrypt_values_per_s": n_phe / min(phe_enc_t), "encrypt_values_per_s": len(values) / min(enc_t),
                    "phe_decrypt_values_per_s": n_phe / min(phe_dec_t), "decrypt_values_per_s": len(values) / min(dec_t)})
    return {k + (suffix if k in ("encrypt_ratio", "decrypt_ratio", "slots_per_ciphertext", "slot_bits") else ""): v
            for k, v in out.items()}


def _fixed_point_values(count: int, codec: FixedPointCodec, rng: np.random.Generator) -> list[int]:
    # Benchmark data only (not key, mask or noise material): a seeded generator is fine here.
    return [int(v) for v in codec.encode(rng.uniform(-1.0, 1.0, size=count))]


def _peak_rss_mb() -> float:
    """Peak resident set of this process image in MB.

    Linux's ``VmHWM`` is reset by ``exec``; ``ru_maxrss`` is not (it keeps the
    high-water mark of the forking parent), so it is only the fallback.
    """
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _triangle_child(pub_json: str, d: int, bound: int, slot_bits: int, slots: int, carry: int) -> dict[str, Any]:
    """Encrypt the upper triangle of a d x d integer matrix in this (fresh) process."""
    pk = PublicKey.from_json(json.loads(pub_json), insecure_test_key=True)
    layout = SlotLayout(slot_bits=slot_bits, slots=slots, carry_bound=carry)
    rng = np.random.default_rng(1)
    half = rng.integers(-(2**48), 2**48, size=(d, d))
    mat = np.triu(half) + np.triu(half, 1).T
    enc, secs = _timed(lambda: EncryptedSymmetricMatrix.encrypt_upper_triangle(pk, mat, layout=layout, bound=bound))
    return {"peak_rss_mb": _peak_rss_mb(),
            "triangle_encrypt_s": secs, "triangle_ciphertexts": len(enc.array.ciphertexts),
            "triangle_bytes": enc.nbytes}


def _measure_triangle(pk: PublicKey, d: int, bound: int, layout: SlotLayout) -> dict[str, Any]:
    code = ("import json, sys; from dpdpca.bench.crypto import _triangle_child; "
            "a = json.loads(sys.stdin.read()); print(json.dumps(_triangle_child(a['pub'], a['d'], a['bound'], "
            "a['slot_bits'], a['slots'], int(a['carry']))))")
    payload = json.dumps({"pub": json.dumps(pk.to_json()), "d": d, "bound": bound, "slot_bits": layout.slot_bits,
                          "slots": layout.slots, "carry": str(layout.carry_bound)})
    out = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_benchmark(*, key_bits: int = 2048, quick: bool = False, d: int = D, insecure_test_key: bool = False,
                  triangle: bool = True, workers: int = 1,
                  progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every measurement and return the JSON object (see the module docstring); ``progress`` is called
    after each phase (:func:`phases` of them)."""
    d = check_int("d", d, minimum=1)  # before the key and the measurements, not in the peak-RSS child at the end
    tick = progress or (lambda label: None)
    rng = np.random.default_rng(0)
    codec = FixedPointCodec(frac_bits=16)
    runs = 3 if quick else 5  # back-to-back pairs per ratio
    (pk, sk), keygen_s = _timed(lambda: generate_keypair(key_bits, insecure_test_key=insecure_test_key))
    declared = dict(owners=OWNERS, rows_per_owner=ROWS_PER_OWNER)
    bound = final_value_bound(**declared)
    layout = SlotLayout.for_final_bound(pk, bound, carry_value_bound(**declared))  # wide packing, both releases
    plain_bound = slot_value_bound(d=D, **declared)
    plain_layout = SlotLayout.for_bound(pk, plain_bound)  # the plain packing: slots hold R'' itself
    ar_layout = ProtocolParams.create(pk, max_owners=OWNERS, max_rows_per_owner=ROWS_PER_OWNER,
                                      release="add-remove").layout  # what keygen --release add-remove makes
    _, table_s = _timed(lambda: pk.hs_table)
    tick("key and fixed-base table")

    # -- encryption and decryption throughput, same values for both libraries --
    n_phe = 24 if quick else 120
    n_ours_ct = 100 if quick else 600
    values = _fixed_point_values(n_ours_ct * max(layout.slots, ar_layout.slots), codec, rng)
    ppk = phe.PaillierPublicKey(int(pk.n))
    psk = phe.PaillierPrivateKey(ppk, int(sk.p), int(sk.q))
    phe_cts = [ppk.encrypt(v) for v in values[:n_phe]]
    if [psk.decrypt(c) for c in phe_cts] != values[:n_phe]:
        raise RuntimeError("python-paillier round trip failed in the benchmark")
    phe_side = {"ppk": ppk, "psk": psk, "values": values[:n_phe], "cts": phe_cts}
    out: dict[str, Any] = {"key_bits": pk.bits, "values": n_ours_ct * ar_layout.slots, "phe_values": n_phe}
    for lay, lay_bound, suffix in ((ar_layout, ar_layout.max_abs, ""), (layout, bound, "_any"),
                                   (plain_layout, plain_bound, "_plain")):
        out.update(_throughput(pk, sk, lay, lay_bound, values[:n_ours_ct * lay.slots], phe_side, runs, suffix))
    values = values[:n_ours_ct * layout.slots]  # the "any" layout's values, for the parallel run below
    tick("encrypt and decrypt throughput")

    # -- aggregation: L arrays, one mulmod per ciphertext and array after the first --
    n_arrays = 100
    n_agg_ct = 300 if quick else 2000
    n2 = pk.nsquare
    per_array_bound = layout.max_abs // n_arrays
    arrays = [EncryptedArray(pk, layout, (layout.slots,) * n_agg_ct, per_array_bound,
                             [random_unit(n2) for _ in range(n_agg_ct)]) for _ in range(n_arrays)]
    a, b = random_unit(n2), random_unit(n2)
    timer = timeit.Timer("a * b % m", globals={"a": a, "b": b, "m": n2})
    n_mulmods = (n_arrays - 1) * n_agg_ct
    # Pair each aggregation with a bare mulmod loop of the same count, run right after
    # it, so both see the same load; report the median of the paired ratios.
    ratios, per_op = [], []
    for _ in range(runs):
        _, agg_s = _timed(lambda: sum_arrays(arrays))
        bare_s = timer.timeit(number=n_mulmods)
        ratios.append(agg_s / bare_s)
        per_op.append(bare_s / n_mulmods)
    mulmod_s = min(per_op)
    arrays.clear()  # free the ciphertexts before the next phase
    tick("aggregation")

    # -- E[x]**pack(w): preprocessed multi-exponentiation against a plain powmod --
    kappa_bound = (OWNERS * ROWS_PER_OWNER << 16) << 40  # mask bound B = 2**kappa * V
    x = encrypt(pk, [123], layout=layout, bound=OWNERS * ROWS_PER_OWNER << 16, chunks=[1])
    n_vec = 16 if quick else 66  # ~d / 12 vectors per row of the triangle
    scale = kappa_bound >> 62
    vectors = [[int(v) * scale for v in rng.integers(-(2**62), 2**62, size=layout.slots)] for _ in range(n_vec)]
    c = x.ciphertexts[0]
    naive_n = 4 if quick else 10
    _, _, fast_t, naive_t = _paired(
        lambda: scalar_times_packed(x, vectors, vector_bound=kappa_bound),
        lambda: [power_mod(c, sum(v << (layout.slot_bits * t) for t, v in enumerate(w)), n2)
                 for w in vectors[:naive_n]], runs)

    out.update({
        "aggregate_efficiency": statistics.median(ratios),
        "aggregate_arrays": n_arrays,
        "aggregate_ciphertexts": n_agg_ct,
        "mulmod_us": mulmod_s * 1e6,
        "slot_bound_bits": bound.bit_length(),
        "carry_bound_bits": layout.carry_bound.bit_length(),
        "table_build_s": table_s,
        "keygen_s": keygen_s,
        "packed_power_speedup": statistics.median((b / naive_n) / (a / n_vec) for a, b in zip(fast_t, naive_t)),
        "quick": quick,
    })
    tick("packed multi-exponentiation")
    if workers > 1:
        with local_process_pool(workers, public_key=pk) as pool:
            # Start every worker (each builds the key's table in its initializer) before timing.
            encrypt(pk, values[:layout.slots * 8 * 4 * workers], layout=layout, bound=bound, executor=pool)
            _, _, ser_t, par_t = _paired(lambda: encrypt(pk, values, layout=layout, bound=bound),
                                         lambda: encrypt(pk, values, layout=layout, bound=bound, executor=pool), runs)
        out["parallel_workers"] = workers
        out["parallel_encrypt_speedup"] = statistics.median(a / b for a, b in zip(ser_t, par_t))
        tick("process-pool encryption")
    if triangle:
        out.update(_measure_triangle(pk, d, bound, layout))
        tick(f"upper triangle at d={d}")
        out["triangle_d"] = d
        out["triangle_chunks_check"] = len(upper_triangle_chunks(d, layout.slots)) == out["triangle_ciphertexts"]
    return out


def phases(*, workers: int = 1, triangle: bool = True) -> int:
    """The number of ``progress`` calls :func:`run_benchmark` makes."""
    return 4 + (workers > 1) + bool(triangle)


_TABLE: list[tuple[str, str | None, str | None]] = [
    ("key bits", "key_bits", "{}"),
    ("slot bits x slots", None, None),
    ("phe encrypt (values/s)", "phe_encrypt_values_per_s", "{:.1f}"),
    ("ours encrypt (values/s)", "encrypt_values_per_s", "{:.1f}"),
    ("encrypt ratio", "encrypt_ratio", "{:.1f}x"),
    ("phe decrypt (values/s)", "phe_decrypt_values_per_s", "{:.1f}"),
    ("ours decrypt (values/s)", "decrypt_values_per_s", "{:.1f}"),
    ("decrypt ratio", "decrypt_ratio", "{:.1f}x"),
    ("encrypt / decrypt ratio (any)", None, "any"),
    ("encrypt / decrypt ratio (plain)", None, "plain"),
    ("aggregate efficiency", "aggregate_efficiency", "{:.3f}"),
    ("one mulmod (us)", "mulmod_us", "{:.2f}"),
    ("E[x]^pack(w) speedup", "packed_power_speedup", "{:.1f}x"),
    ("fixed-base table build (s)", "table_build_s", "{:.2f}"),
    ("process-pool encrypt speedup", "parallel_encrypt_speedup", "{:.2f}x"),
    ("triangle d", "triangle_d", "{}"),
    ("triangle ciphertexts", "triangle_ciphertexts", "{}"),
    ("triangle encrypt (s)", "triangle_encrypt_s", "{:.1f}"),
    ("triangle bytes", "triangle_bytes", "{}"),
    ("peak RSS (MB)", "peak_rss_mb", "{:.0f}"),
]


@click.command("crypto")
@click.option("--quick", is_flag=True, help="Fewer samples; finishes in under a minute.")
@click.option("--key-bits", default=2048, show_default=True, type=click.IntRange(max=MAX_KEY_BITS),
              help=f"Paillier modulus size (at most {MAX_KEY_BITS}).")
@click.option("--d", "d", default=D, show_default=True, type=click.IntRange(min=1),
              help="Matrix size for the peak-RSS run.")
@click.option("--insecure-test-key", is_flag=True, help="Allow --key-bits below 2048 (testing only).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Also time encryption on a local process pool of this size.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(quick: bool, key_bits: int, d: int, insecure_test_key: bool, workers: int, as_json: bool,
            quiet: bool) -> None:
    """Packed DJN encryption vs python-paillier: throughput ratios, aggregation, memory."""
    with Progress("bench crypto", total=phases(workers=workers), quiet=quiet) as progress:
        result = run_benchmark(key_bits=key_bits, quick=quick, d=d, insecure_test_key=insecure_test_key,
                               workers=workers, progress=progress)
    if as_json:
        click.echo(json.dumps(result, sort_keys=True))
        return
    for label, key, fmt in _TABLE:
        if key is None and fmt in ("any", "plain"):
            value = (f"{result['encrypt_ratio_' + fmt]:.1f}x / {result['decrypt_ratio_' + fmt]:.1f}x "
                     f"({result['slot_bits_' + fmt]} x {result['slots_per_ciphertext_' + fmt]})")
        elif key is None or fmt is None:
            value = f"{result['slot_bits']} x {result['slots_per_ciphertext']}"
        elif key not in result:
            continue
        else:
            value = fmt.format(result[key])
        click.echo(f"{label:<32} {value}")
