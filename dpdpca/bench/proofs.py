"""``dpdpca bench proofs``: the owners' range proofs against the work they protect, in one run.

For each d: an owner's share of random rows (norm <= 1) is made by
:class:`~dpdpca.protocol.DataOwner` without proofs (its ``encrypt`` phase
is the owner's encryption time) and taken in by a
:class:`~dpdpca.protocol.Proxy` (``receive_share``, plus one modular
multiplication per ciphertext for its part of the aggregation: the proxy's
per-share intake work).  The same share values are then encrypted for a
proof and proved and verified (:mod:`dpdpca.protocol.proofs`).

Proving and verifying are linear in the repetitions ``T``: every repetition
encrypts (prover) or combines (verifier) one share-sized mask vector.  Where
a full ``T = 41`` run does not fit (``--measure-reps``), the benchmark times
``r1`` and ``r2`` repetitions (each counted as one attempt: the commitments
of a rejection restart are subtracted) and reports the larger of
``t(r1) + (41 - r1) * (t(r2) - t(r1)) / (r2 - r1)`` and ``41 t(r2) / r2``, saying so in ``extrapolated``.  Proof bytes
are exact (the format's sizes are fixed by the statement).

The exact count proof (:mod:`dpdpca.crypto.bitproof`) is timed in full on
the add/remove statement for N (no owners' noise) under the same key:
``count_prove_s``, ``count_verify_s``, ``count_proof_bytes``, ``count_bits``.
A share carries it where it encrypts N (``count_proof_in_share``: the
add/remove release, ``--release add-remove``); there the totals
(``prove_s``, ``verify_s``, ``proof_bytes``) include it (``proof_bytes``
always includes the proof section's 26-byte header).

``--mode exact`` (or ``both``): the exact mode's proofs
(:func:`dpdpca.protocol.proofs.slot_statements`: one packed interval proof
per ciphertext, every slot's bits) are timed in full on the same encrypted
values, beside the slack mode's in the same run (``exact``: ``prove_s``,
``verify_s``, ``proof_bytes``, ``bits``, the per-bit costs and the ratios to
the owner's encryption, the proxy's intake, the share's bytes and the slack
mode).  The top-level ``exact_extrapolated`` multiplies the per-bit costs of
the largest measured d by the exact bit counts at ``--extrapolate-to`` d's
(the statements' bits are exact; the times and bytes are an extrapolation,
so labelled).  ``loadavg`` is ``os.getloadavg()`` before and after the run.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import click
import numpy as np

from dpdpca.crypto.keys import MAX_KEY_BITS
from dpdpca.dp.release import RELEASES
from dpdpca.progress import Progress, quiet_option

__all__ = ["command", "measure"]


def _rows(d: int, n: int, seed: int) -> np.ndarray:
    X = np.random.default_rng(seed).normal(size=(n, d))
    return 0.9 * X / np.linalg.norm(X, axis=1, keepdims=True)


def exact_bits(params: Any, release: str, d: int) -> int:
    """Bits of the exact mode's proofs of one share at ``d`` (the statements from public values alone)."""
    from dpdpca.protocol.proofs import slot_statements
    from dpdpca.protocol.releases import as_release

    class _Shape:  # what slot_statements reads of an array: its ciphertexts and chunks
        def __init__(self, chunks: list[int]) -> None:
            self.chunks, self.ciphertexts = chunks, [1] * len(chunks)

    shapes = {name: _Shape(list(c)) for name, c in as_release(release).share_chunks(d, params.layout.slots).items()}
    statements = slot_statements(params, release, shapes, d=d)  # type: ignore[arg-type]
    return sum(int(st.bits) for st in statements)


def measure_exact(params: Any, base: Any, release: str, enc: dict[str, Any], wits: dict[str, Any], *, d: int,
                  context: bytes) -> dict[str, Any]:
    """The exact mode on encrypted values: every ciphertext's packed interval proof, proved and verified in full."""
    from dpdpca.crypto.bitproof import prove_packed_interval, verify_interval
    from dpdpca.protocol.proofs import join_proofs, slot_statements

    statements = slot_statements(params, release, enc, d=d)
    values = [int(v) for name in enc for v in wits[name].values]
    exps = [int(e) for name in enc for e in wits[name].exponents]
    t0 = time.perf_counter()
    proofs, pos = [], 0
    for st, exp in zip(statements, exps):
        proofs.append(prove_packed_interval(base, st, values=values[pos:pos + len(st.spans)], exponent=exp,
                                            context=context).to_bytes(params.public_key, st))
        pos += len(st.spans)
    prove_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for blob, st in zip(proofs, statements):
        verify_interval(params.public_key, blob, st, context=context)
    verify_s = time.perf_counter() - t0
    bits = sum(st.bits for st in statements)
    size = len(join_proofs(*proofs, mode="exact"))
    return {"prove_s": prove_s, "verify_s": verify_s, "proof_bytes": size, "bits": bits,
            "proofs": len(proofs), "prove_per_bit_s": prove_s / bits, "verify_per_bit_s": verify_s / bits,
            "bytes_per_bit": size / bits}


def measure(d: int, *, key: Any, rows: int = 50, reps: tuple[int, ...] | None = None,
            release: str = "centred", mode: str = "slack") -> dict[str, Any]:
    """One d: encryption, intake, proving, verification and sizes (see the module docstring).

    ``mode``: ``"slack"``, ``"exact"`` or ``"both"``; the slack mode's figures are always made (the comparison).
    """
    from dpdpca.crypto.rangeproof import REPETITIONS, ProofGeometry, ProverBase, SectionWitness, encrypt_for_proof
    from dpdpca.crypto.rangeproof import prove_ranges, verify_ranges
    from dpdpca.protocol import DataOwner, Proxy
    from dpdpca.protocol.identity import OwnerIdentity, OwnerKeyring
    from dpdpca.protocol.releases import as_release
    from dpdpca.protocol.messages import Message
    from dpdpca.protocol.params import ProtocolParams
    from dpdpca.crypto.bitproof import prove_interval, verify_interval
    from dpdpca.protocol.proofs import COUNT_SECTION, count_statement, join_proofs, proof_context, proof_sections
    from dpdpca.protocol.quantize import exact_scatter_share, quantize_rows
    from dpdpca.crypto import upper_triangle_flatten

    pk = key
    insecure = pk.bits < 2048
    params = ProtocolParams.create(pk, max_owners=10, max_rows_per_owner=max(rows, 1000), release=release)
    ident = OwnerIdentity.generate("1")
    X = _rows(d, rows, d)
    owner = DataOwner(params, ident, insecure_test_key=insecure, release=release)
    data = owner.share(X)
    mine = owner.timings_.to_dict()["parties"][owner.party]  # wall seconds (to_dict's cpu_s is not added in)
    encrypt_s = mine.get("encrypt", 0.0) + mine.get("precompute", 0.0)
    share_bytes = sum(len(v) for k, v in Message.from_bytes(data).sections.items())
    # the proxy's intake of this one share, and its part of the aggregation (one mulmod per ciphertext)
    proxy = Proxy(params, OwnerKeyring.from_identities([ident]), quorum=1, release=release)
    t0 = time.perf_counter()
    proxy.receive_share(data)
    arrays = proxy._shares["1"]
    n2 = pk.nsquare
    acc = [c for arr in arrays.values() for c in arr.ciphertexts]
    _ = [c * c % n2 for c in acc]
    intake_s = time.perf_counter() - t0
    ciphertexts = len(acc)
    # the same values, encrypted for a proof (exponents kept), then proved and verified
    Xq = quantize_rows(X, params.frac_bits)
    R, v, n = exact_scatter_share(Xq, params.frac_bits)
    vals, _ = as_release(release).share_values(upper_triangle_flatten(R), [int(x) for x in v], int(n),
                                               frac_bits=params.frac_bits, slots=params.layout.slots, noise=None)
    bounds = params.share_bounds(release)
    base = ProverBase.draw(pk)
    enc, wits = {}, {}
    for name, chunks in as_release(release).share_chunks(d, params.layout.slots).items():
        enc[name], exps = encrypt_for_proof(base, vals[name], layout=params.layout, chunks=chunks,
                                            bound=bounds[name])
        wits[name] = SectionWitness(vals[name], exps)
    sections = proof_sections(params, release, enc)
    ctx = proof_context(params, owner_id="1", d=d, release=release, digest="0" * 64)
    geom = ProofGeometry.of(sections)
    runs = (REPETITIONS,) if reps is None else tuple(reps)
    prove_t: dict[int, float] = {}
    verify_t: dict[int, float] = {}
    sizes: dict[int, int] = {}
    split: dict[int, dict[str, float]] = {}
    for r in runs:
        t0 = time.perf_counter()
        split[r] = {}
        proof = prove_ranges(base, sections, [wits[s.name] for s in sections], context=ctx, repetitions=r,
                             timings=split[r])
        prove_t[r] = time.perf_counter() - t0
        blob = proof.to_bytes(pk)
        sizes[r] = len(blob)
        t0 = time.perf_counter()
        verify_ranges(pk, blob, sections, context=ctx, repetitions=r)
        verify_t[r] = time.perf_counter() - t0
    T = REPETITIONS
    if len(runs) == 1:
        prove_s, verify_s, proof_bytes = prove_t[T], verify_t[T], sizes[T]
    else:
        r1, r2 = runs[0], runs[-1]
        # one attempt each: a rejection restart (probability < 1/4) repeats the commitments; drop the extra ones
        one = {r: prove_t[r] - split[r]["commit_s"] * (split[r]["attempts"] - 1) / split[r]["attempts"]
               for r in runs}
        # linear in T; a negative slope (timing noise at small sizes) falls back to proportional scaling
        prove_s = max(one[r1] + (T - r1) * (one[r2] - one[r1]) / (r2 - r1), one[r2] * T / r2)
        verify_s = max(verify_t[r1] + (T - r1) * (verify_t[r2] - verify_t[r1]) / (r2 - r1), verify_t[r2] * T / r2)
        proof_bytes = sizes[r1] + (T - r1) * (sizes[r2] - sizes[r1]) // (r2 - r1)
    # the exact count proof for N (add/remove statement, no owners' noise), timed in full
    cparams = params if COUNT_SECTION in enc else ProtocolParams.create(
        pk, max_owners=10, max_rows_per_owner=max(rows, 1000), release="add-remove")
    n_value = n << (2 * cparams.frac_bits)
    if COUNT_SECTION in enc:
        n_ct, n_exp = enc[COUNT_SECTION].ciphertexts[0], wits[COUNT_SECTION].exponents[0]
    else:
        n_arr, n_exps = encrypt_for_proof(base, [n_value], layout=cparams.layout, chunks=(1,),
                                          bound=cparams.share_bounds("add-remove")[COUNT_SECTION])
        n_ct, n_exp = n_arr.ciphertexts[0], n_exps[0]
    cst = count_statement(cparams, n_ct, d=d)
    t0 = time.perf_counter()
    cproof = prove_interval(base, cst, value=n_value, exponent=n_exp, context=ctx).to_bytes(pk, cst)
    count_prove_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    verify_interval(pk, cproof, cst, context=ctx)
    count_verify_s = time.perf_counter() - t0
    in_share = COUNT_SECTION in enc
    if in_share:
        prove_s += count_prove_s
        verify_s += count_verify_s
    # the proof section: its header and two lengths, and the count proof where the share encrypts N
    proof_bytes += len(join_proofs(b"", cproof if in_share else b""))
    exact = None
    if mode in ("exact", "both"):
        exact = measure_exact(params, base, release, enc, wits, d=d, context=ctx)
        exact.update(prove_over_encrypt=exact["prove_s"] / encrypt_s, verify_over_intake=exact["verify_s"] / intake_s,
                     proof_over_share_bytes=exact["proof_bytes"] / share_bytes,
                     prove_over_slack=exact["prove_s"] / prove_s, verify_over_slack=exact["verify_s"] / verify_s,
                     bytes_over_slack=exact["proof_bytes"] / proof_bytes)
    return {
        "exact": exact,
        "d": d, "rows": rows, "ciphertexts": ciphertexts, "slots": geom.slots,
        "headroom_bits": geom.headroom_bits,
        "proven_over_declared_bits": {s.name: int(geom.proven_bounds[s.name]).bit_length()
                                      - int(s.bound).bit_length() for s in sections},
        "encrypt_s": encrypt_s, "prove_s": prove_s, "prove_over_encrypt": prove_s / encrypt_s,
        "intake_s": intake_s, "verify_s": verify_s, "verify_over_intake": verify_s / intake_s,
        "share_bytes": share_bytes, "proof_bytes": proof_bytes, "proof_over_share_bytes": proof_bytes / share_bytes,
        "repetitions": T, "measured_repetitions": list(runs), "extrapolated": len(runs) > 1,
        "measured_prove_s": {str(k): v for k, v in prove_t.items()},
        # the data-independent commitments vs the rest, per measured run (1 + restarts in "attempts")
        "measured_prove_split": {str(k): v for k, v in split.items()},
        "measured_verify_s": {str(k): v for k, v in verify_t.items()},
        "count_proof_in_share": in_share, "count_bits": cst.bits, "count_prove_s": count_prove_s,
        "count_verify_s": count_verify_s, "count_proof_bytes": len(cproof),
        "goals_met": {"prove": prove_s <= 2 * encrypt_s, "verify": verify_s <= 2 * intake_s,
                      "bytes": proof_bytes <= share_bytes},
    }


@click.command("proofs")
@click.option("--key-bits", type=click.IntRange(min=16, max=MAX_KEY_BITS), default=2048, show_default=True,
              help=f"Paillier modulus bits (at most {MAX_KEY_BITS}).")
@click.option("--insecure-test-key", is_flag=True, help="Allow --key-bits below 2048 (tests only).")
@click.option("--d", "ds", type=click.IntRange(min=1), multiple=True, default=(64, 784), show_default=True,
              help="Feature counts to measure (repeatable).")
@click.option("--rows", type=click.IntRange(min=1), default=50, show_default=True, help="Rows of the owner.")
@click.option("--measure-reps", type=int, nargs=2, default=(2, 4), show_default=True,
              help="Above --full-up-to, time these two repetition counts and extrapolate to 41 (linear).")
@click.option("--full-up-to", type=click.IntRange(min=0), default=64, show_default=True,
              help="Run the full 41 repetitions for d up to this.")
@click.option("--release", type=click.Choice(RELEASES), default="centred", show_default=True,
              help="The release whose share is proved (add-remove: N is encrypted and carries the count proof).")
@click.option("--mode", type=click.Choice(["slack", "exact", "both"]), default="slack", show_default=True,
              help="exact/both: also time the exact mode's proofs (every slot's bits) beside the slack mode's.")
@click.option("--extrapolate-to", "extrapolate_to", type=click.IntRange(min=1), multiple=True, default=(64, 784),
              show_default=True, help="With --mode exact: d's the exact mode's per-bit costs are extrapolated to.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@quiet_option
def command(key_bits: int, insecure_test_key: bool, ds: tuple[int, ...], rows: int, measure_reps: tuple[int, int],
            full_up_to: int, release: str, mode: str, extrapolate_to: tuple[int, ...], as_json: bool,
            quiet: bool) -> None:
    """Range proofs: proving vs the owner's encryption, verifying vs the proxy's intake, proof vs share bytes."""
    from dpdpca.crypto import generate_keypair
    from dpdpca.errors import ParameterError

    r1, r2 = measure_reps
    if not 1 <= r1 < r2:
        raise ParameterError(f"--measure-reps must be two counts 1 <= r1 < r2, got {r1} {r2}")
    out: dict[str, Any] = {"key_bits": key_bits, "release": release, "mode": mode, "results": [],
                           "loadavg": {"before": list(os.getloadavg())}}
    with Progress("bench proofs", total=1 + len(ds), quiet=quiet) as progress:
        pk, _ = generate_keypair(key_bits, insecure_test_key=insecure_test_key)
        progress("key")
        for d in ds:
            out["results"].append(measure(d, key=pk, rows=rows, reps=None if d <= full_up_to else (r1, r2),
                                          release=release, mode=mode))
            progress(f"d={d}")
        if mode != "slack":
            from dpdpca.protocol.params import ProtocolParams

            last = max(out["results"], key=lambda r: r["d"])
            params = ProtocolParams.create(pk, max_owners=10, max_rows_per_owner=max(rows, 1000), release=release)
            per = last["exact"]
            out["exact_extrapolated"] = {"from_d": last["d"], "note": "extrapolation: measured per-bit cost times "
                                         "the exact bit count", "results": [
                {"d": d, "bits": (b := exact_bits(params, release, d)), "prove_s": b * per["prove_per_bit_s"],
                 "verify_s": b * per["verify_per_bit_s"], "proof_bytes": int(b * per["bytes_per_bit"])}
                for d in extrapolate_to]}
    out["loadavg"]["after"] = list(os.getloadavg())
    if as_json:
        click.echo(json.dumps(out, sort_keys=True))
        return
    click.echo(f"range proofs, {key_bits}-bit key (T = 41 binary repetitions)")
    for r in out["results"]:
        ex = " (extrapolated from " + "/".join(map(str, r["measured_repetitions"])) + " reps)" \
            if r["extrapolated"] else ""
        click.echo(f"d={r['d']}: prove {r['prove_s']:.2f} s = {r['prove_over_encrypt']:.1f}x encryption; "
                   f"verify {r['verify_s']:.2f} s = {r['verify_over_intake']:.1f}x intake; "
                   f"proof {r['proof_bytes']:,} B = {r['proof_over_share_bytes']:.1f}x share{ex}")
        where = "included above" if r["count_proof_in_share"] else "not in a centred share: N is signed in the clear"
        click.echo(f"  exact count proof ({r['count_bits']} bits): prove {r['count_prove_s'] * 1e3:.0f} ms, "
                   f"verify {r['count_verify_s'] * 1e3:.0f} ms, {r['count_proof_bytes']:,} B ({where})")
        if r["exact"] is not None:
            e = r["exact"]
            click.echo(f"  exact mode ({e['bits']} bits, {e['proofs']} proofs): prove {e['prove_s']:.2f} s = "
                       f"{e['prove_over_slack']:.1f}x slack, verify {e['verify_s']:.2f} s = "
                       f"{e['verify_over_slack']:.1f}x slack, proof {e['proof_bytes']:,} B = "
                       f"{e['bytes_over_slack']:.1f}x slack")
    for x in out.get("exact_extrapolated", {}).get("results", []):
        click.echo(f"exact mode at d={x['d']} (EXTRAPOLATED from d={out['exact_extrapolated']['from_d']}'s per-bit "
                   f"cost, {x['bits']} bits): prove {x['prove_s']:.0f} s, verify {x['verify_s']:.0f} s, "
                   f"proof {x['proof_bytes']:,} B")
    click.echo(f"load average before/after: {out['loadavg']['before'][0]:.2f}/{out['loadavg']['after'][0]:.2f}")
