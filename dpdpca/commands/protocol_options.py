"""Options and loaders shared by ``dpdpca run`` and the per-role commands.

The DP noise options (``--calibration``, ``--sensitivity-mode``,
``--noise-lattice``), ``--workers`` / ``--scheduler`` (:class:`Pool`),
``--packing``, ``--max-features``, ``--owner-keys``, and the readers of the
key files ``dpdpca keygen`` writes.
"""

from __future__ import annotations

from typing import Any, Callable

import click

from dpdpca._io import read_json_file
from dpdpca.errors import MessageError
from dpdpca.protocol.proofs import RANGE_PROOF_MODES

__all__ = ["range_proofs_option", "range_proof_mode_check_option", "NOISE_OPTIONS", "noise_options", "workers_option", "scheduler_option", "packing_option", "scheme_option",
           "max_features_option", "owner_keys_option", "Pool", "load_public", "load_private", "load_owner_keys",
           "insecure_test_key_option"]


NOISE_OPTIONS = [
    click.option("--calibration", type=click.Choice(["analytic", "classic"]), default="analytic", show_default=True,
                 help="analytic: rigorous zCDP calibration of the discrete Gaussian (Canonne, Kamath & Steinke); "
                      "classic: the paper's sigma = Delta sqrt(2 ln(1.25/delta)) / epsilon."),
    click.option("--sensitivity-mode", type=click.Choice(["rigorous", "paper"]), default="rigorous",
                 show_default=True, help="rigorous: our replace-one bound; paper: Wang & Chang's Delta = 1."),
    click.option("--noise-lattice", type=click.Choice(["n-scaled", "integer"]), default="n-scaled",
                 show_default=True,
                 help="n-scaled (rigorous): noise on N*S; integer: the paper's form N*G' (leaks v v^T mod N)."),
]


#: Process-pool size for the crypto batches (1: serial, in this process).
workers_option = click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
                              help="Processes for the crypto batches (local process pool).")


def noise_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for opt in reversed(NOISE_OPTIONS):
        fn = opt(fn)
    return fn


#: Largest key file read: a BFV key holds its public contexts (about 0.5 MB per plaintext prime at N = 8192).
KEY_FILE_MAX_BYTES = 16 << 20


#: How a command's refusal of a test key names its consent (``ProtocolParams.from_json``'s ``test_key_consent``).
TEST_KEY_CONSENT = "this party passes --insecure-test-key"


def insecure_test_key_option(party: str, key: str = "a data-user key") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--insecure-test-key``: THIS party (``party``: "owner", "proxy", "data user") accepts a test ``key``.

    A key below 2048 bits is accepted only if the data user's public
    parameters declare it a test key (``keygen --insecure-test-key``) and the
    party that loads them passes this flag too.
    """
    return click.option("--insecure-test-key", is_flag=True,
                        help=f"This {party} accepts {key} below 2048 bits (tests only).")


def load_public(path: str, *, insecure_test_key: bool = False) -> Any:
    """The public parameters of ``path``; a test key only with the caller's ``insecure_test_key`` too."""
    from dpdpca.protocol.params import ProtocolParams

    return ProtocolParams.from_json(read_json_file(path, "public parameters", max_bytes=KEY_FILE_MAX_BYTES),
                                    insecure_test_key=insecure_test_key, test_key_consent=TEST_KEY_CONSENT)


def load_private(path: str, *, insecure_test_key: bool = False) -> tuple[Any, Any]:
    """The secret key and public parameters of ``path``; a test key only with the caller's ``insecure_test_key``."""
    from dpdpca.crypto import private_key_from_json
    from dpdpca.protocol.params import PARAMS_KEY, ProtocolParams

    data = read_json_file(path, "private key", max_bytes=KEY_FILE_MAX_BYTES)
    if (not isinstance(data, dict) or not isinstance(data.get(PARAMS_KEY), dict)
            or not isinstance(data.get("pub"), dict)):
        raise MessageError(f"private key file {path!r} must be written by dpdpca keygen (objects "
                           f"{PARAMS_KEY!r} and 'pub'), got other JSON")
    params = ProtocolParams.from_json({**data["pub"], PARAMS_KEY: data[PARAMS_KEY]},
                                      insecure_test_key=insecure_test_key, test_key_consent=TEST_KEY_CONSENT)
    # the parameters passed both consents (or the key is at the floor): the secret key is read as they were
    sk = private_key_from_json({k: v for k, v in data.items() if k != PARAMS_KEY},
                               insecure_test_key=bool(getattr(params.public_key, "insecure_test_key", False)))
    return sk, params


def load_owner_keys(paths: tuple[str, ...]) -> Any:
    from dpdpca.protocol.identity import OwnerKeyring

    return OwnerKeyring.load(paths)


#: ``--max-features``: the largest d accepted from a message, checked before any allocation.
max_features_option = click.option("--max-features", default=4096, show_default=True, type=click.IntRange(min=1),
                                   help="Largest number of features d accepted from a message.")
#: ``--owner-keys``: the owners' verify-key files (repeat the option, one or more files).
owner_keys_option = click.option("--owner-keys", "owner_keys", required=True, multiple=True,
                                 type=click.Path(dir_okay=False),
                                 help="Owners' verify-key file(s) from 'dpdpca owner keygen' (repeatable).")


#: A Dask scheduler for the crypto batches of owners and proxy (optional extra [distributed]).
scheduler_option = click.option("--scheduler", default=None, metavar="tcp://HOST:8786",
                                help="Run the crypto batches on this Dask cluster (pip install "
                                     "'dpdpca[distributed]'); decryption always stays local.")
#: Slot layout of new public parameters.
scheme_option = click.option("--scheme", type=click.Choice(["paillier", "bfv"]), default="paillier",
                              show_default=True,
                              help="Encryption scheme: paillier (the paper's) or bfv (post-quantum lattice, add/remove "
                                   "release only; needs pip install 'dpdpca[lattice]'; --key-bits does not apply).")
packing_option = click.option("--packing", type=click.Choice(["wide", "plain"]), default="wide", show_default=True,
                              help="wide: slots sized for the decrypted values (the user subtracts v'v'^T under "
                                   "encryption first); plain: the earlier layout sized for R''.")


class Pool:
    """Context manager: a Dask engine with ``scheduler``, a process pool with ``workers > 1``, else None."""

    def __init__(self, workers: int, scheduler: str | None = None) -> None:
        self.workers = workers
        self.scheduler = scheduler
        self.pool: Any = None
        self.engine: Any = None

    def __enter__(self) -> Any:
        if self.scheduler:
            from dpdpca.crypto.compute import dask_engine

            self.engine = dask_engine(self.scheduler)
            return self.engine
        if self.workers > 1:
            from dpdpca.crypto import local_process_pool

            self.pool = local_process_pool(self.workers)
        return self.pool

    def __exit__(self, *exc: Any) -> None:
        if self.pool is not None:
            self.pool.shutdown()
        if self.engine is not None:
            self.engine.close()


_RANGE_PROOFS = click.option(
    "--range-proofs/--no-range-proofs", "range_proofs", default=False, show_default=True,
    help="Owners prove in zero knowledge that every slot of their shares is within the declared bounds; "
         "the proxy refuses and excludes an owner whose proof fails (costly: see README).")
_RANGE_PROOF_MODE = click.option(
    "--range-proof-mode", "range_proof_mode", type=click.Choice(RANGE_PROOF_MODES), default="slack",
    show_default=True,
    help="With --range-proofs: slack bounds every slot up to the slack proof's bound (N exactly); exact proves "
         "every slot within its declared interval (costlier: see README). Owners and proxy must agree.")


def range_proofs_option(f: Callable[..., Any]) -> Callable[..., Any]:
    """``--range-proofs / --no-range-proofs`` and ``--range-proof-mode [slack|exact]`` (off, slack by default)."""
    return _RANGE_PROOFS(_RANGE_PROOF_MODE(f))


#: ``--range-proof-mode`` where the mode is checked or overridden, not chosen (proxy serve/finish, user finish).
range_proof_mode_check_option = click.option(
    "--range-proof-mode", "range_proof_mode", type=click.Choice(RANGE_PROOF_MODES), default=None,
    help="Check (or, for proxy serve, override) the range-proof mode of the session (default: no check).")
