"""``proxy.toml``: everything ``dpdpca proxy serve`` needs, validated once.

Example (relative paths are resolved against the file's directory):

.. code-block:: toml

    [server]
    host = "127.0.0.1"
    port = 8443
    tls_cert = "server.pem"        # certificate chain (PEM)
    tls_key = "server.key"         # its private key (PEM)
    state_dir = "proxy-state"      # shares and state, written atomically
    max_body_bytes = 67108864      # refused from the signed Content-Length, before the body is read
    header_timeout_s = 10          # TLS handshake + a request's headers, from the accept
    body_timeout_s = 300           # a signed request's whole body, from its signature check
    max_connections = 256          # at once, handshakes included (the oldest still waiting is evicted)
    max_header_bytes = 16384       # a request's header block
    public_status = true           # false: no unauthenticated / and /v1/session (404); /v1/status stays

    [protocol]
    public = "public.json"         # the data user's public parameters
    owner_keys = ["alice.verify.json", "bob.verify.json"]   # from dpdpca owner keygen
    quorum = 3                     # close as soon as this many shares arrived
    min_shares = 1                 # shares needed when the deadline closes collection
    collection_seconds = 600       # deadline after the first start, <= a year (or: deadline = 2030-01-01T00:00:00Z)
    release = "on-close"           # finish at closing; or "on-request": when the user first asks
    epsilon = 1.0
    delta = 1e-5
    calibration = "analytic"       # see dpdpca proxy finish
    sensitivity_mode = "rigorous"
    noise_lattice = "n-scaled"
    release_mode = "add-remove"    # the default (as dpdpca run); "centred": the paper's masked release
    noise_by = "proxy"             # or "owners" (add-remove only): the owners' shares carry the noise
    budget_epsilon = 3.0           # optional: the total budget over every session of this data ...
    budget_delta = 1e-5            # ... the proxy refuses a release past it, before any noise is drawn
    budget_ledger = "privacy-ledger.json"   # where the sessions' releases are recorded (this default)
    range_proofs = false           # true: every share must carry a valid range proof (README: its cost)
    range_proof_mode = "slack"     # or "exact": every slot within its declared interval (costlier; owners must match)
    insecure_test_key = false      # true (tests only): accept a data-user key below 2048 bits declared a test key

    [user]
    verify_keys = "user.verify.json"   # from dpdpca user identity
    # token = "..."                    # optional bearer token on top (>= 16 characters)

    [tokens]                           # optional bearer tokens of owners, by owner id
    # alice = "..."

Every owner that may send a share is listed in one of the ``owner_keys``
files; the proxy's release ledger is ``state_dir/ledger.json``.  With a
budget, every session's release is priced by the calibration that draws its
noise and recorded in ``budget_ledger`` (a :class:`dpdpca.dp.PrivacyLedger`,
shared by the sessions that name it); a release past the budget is refused
before anything is drawn or decrypted (the user's ``GET /result`` answers
``403 refused``).
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpdpca._validation import check_int, param_error
from dpdpca.dp.accountant import PrivacyLedger
from dpdpca.errors import MessageError, ParameterError
from dpdpca.net.auth import USER, PartyKeys
from dpdpca.net.guard import ConnectionLimits
from dpdpca.protocol.identity import OwnerKeyring
from dpdpca.protocol.config import ReleaseOptions
from dpdpca.protocol.proofs import RANGE_PROOF_MODES

__all__ = ["MAX_COLLECTION_SECONDS", "MAX_DEADLINE_UNIX", "NoiseConfig", "ServiceConfig", "load_config"]

#: Longest collection accepted (``protocol.collection_seconds``, ``proxy init --collection-seconds``): a year.
#: A collection gathers one session's shares in hours or days; a longer one is a mistake (seconds typed as
#: milliseconds), and 1e300 seconds would name no date the service, its log or ``proxy status`` can show.
MAX_COLLECTION_SECONDS = 365 * 86400.0
#: Latest ``protocol.deadline`` accepted: 9999-12-31T23:59:59Z, the last second a date-time can name.
MAX_DEADLINE_UNIX = 253402300799.0


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise param_error(name, "true or false", value)
    return value

DEFAULT_MAX_BODY = 64 << 20


#: The proxy's release options (:class:`dpdpca.protocol.config.ReleaseOptions`), by their service name.
#: Without ``release_mode`` in ``proxy.toml`` the service makes the project's default release,
#: add/remove (as ``dpdpca run``); ``release_mode = "centred"`` selects the paper's masked release.
NoiseConfig = ReleaseOptions


@dataclass(frozen=True)
class ServiceConfig:
    """A validated ``proxy.toml``.

    Parameters
    ----------
    public_path : Path
        The data user's ``public.json``.
    state_dir : Path
    owner_keys : OwnerKeyring
        The owners allowed to send a share.
    user_keys : OwnerKeyring
        The data user's verify key (id ``"user"``).
    tokens : dict of party to bearer token
        ``"user"`` and ``"owner:<id>"`` that must present a token too.
    quorum : int
        Collection closes as soon as this many shares were accepted.
    min_shares : int
        Shares needed to proceed when the deadline closes collection.
    deadline : float or None
        Absolute unix time at which collection closes (finite, at most
        :data:`MAX_DEADLINE_UNIX`).
    collection_seconds : float or None
        Or: seconds after the service first started on ``state_dir``
        (persisted, so a restart keeps the original deadline); at most
        :data:`MAX_COLLECTION_SECONDS` (a year).
    noise : ReleaseOptions
        The release and its DP options (``proxy.toml``: ``release_mode``,
        ``epsilon``, ``delta``, ``calibration``, ``sensitivity_mode``,
        ``noise_lattice``, ``noise_by``, ``honest_owners``); default the
        add/remove release.
    release : {"on-close", "on-request"}
        When the proxy finishes (see :class:`dpdpca.net.collection.Collection`).
    max_body_bytes : int
    limits : ConnectionLimits
        Header and body timeouts, the connection cap and the header size
        (:mod:`dpdpca.net.guard`).
    host, port : str, int
    public_status : bool
        Serve the unauthenticated status page ``/`` and ``/v1/session``
        (default); ``false`` removes both routes (404), so a stranger learns
        nothing of the session, and operators use ``GET /v1/status`` (signed).
    insecure_test_key : bool
        This proxy accepts a data-user key below 2048 bits (tests only;
        ``protocol.insecure_test_key``, or ``proxy serve --insecure-test-key``);
        the public parameters must declare it a test key too.
    tls_cert, tls_key : Path or None
        Both or neither; without them the service speaks plain HTTP (tests of
        the application only; ``dpdpca proxy serve`` requires TLS unless told
        ``--insecure-http``).
    """

    public_path: Path
    state_dir: Path
    owner_keys: OwnerKeyring
    user_keys: OwnerKeyring
    quorum: int
    tokens: Mapping[str, str] = field(default_factory=dict)
    min_shares: int = 1
    deadline: float | None = None
    collection_seconds: float | None = None
    noise: ReleaseOptions = ReleaseOptions()
    release: str = "on-close"
    budget_epsilon: float | None = None
    budget_delta: float | None = None
    budget_ledger: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY
    limits: ConnectionLimits = ConnectionLimits()
    host: str = "127.0.0.1"
    port: int = 8443
    tls_cert: Path | None = None
    tls_key: Path | None = None
    range_proofs: bool = False
    public_status: bool = True
    range_proof_mode: str = "slack"
    insecure_test_key: bool = False

    def __post_init__(self) -> None:
        check_int("quorum", self.quorum, minimum=1, maximum=len(self.owner_keys))
        if self.release not in ("on-close", "on-request"):
            raise param_error("protocol.release", "'on-close' or 'on-request'", self.release)
        check_int("min_shares", self.min_shares, minimum=1, maximum=self.quorum)
        check_int("max_body_bytes", self.max_body_bytes, minimum=1024)
        check_int("port", self.port, minimum=0, maximum=65535)
        if self.range_proof_mode not in RANGE_PROOF_MODES:
            raise param_error("protocol.range_proof_mode", f"one of {', '.join(RANGE_PROOF_MODES)}",
                              self.range_proof_mode)
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ParameterError(f"tls_cert and tls_key must be given together, got cert={self.tls_cert} "
                                 f"key={self.tls_key}")
        if self.deadline is None and self.collection_seconds is None:
            raise ParameterError("protocol.deadline or protocol.collection_seconds must be set, got neither")
        if self.collection_seconds is not None and not 0 < self.collection_seconds <= MAX_COLLECTION_SECONDS:
            raise param_error("protocol.collection_seconds", f"in (0, {MAX_COLLECTION_SECONDS:.0f}] (a year)",
                              self.collection_seconds)
        if self.deadline is not None and not 0 <= self.deadline <= MAX_DEADLINE_UNIX:  # also refuses NaN
            raise param_error("protocol.deadline", f"a finite unix time in [0, {MAX_DEADLINE_UNIX:.0f}] (up to "
                              f"9999-12-31T23:59:59Z)", self.deadline)
        if (self.budget_epsilon is None) != (self.budget_delta is None):
            raise ParameterError(f"protocol.budget_epsilon and protocol.budget_delta must be given together, got "
                                 f"epsilon={self.budget_epsilon} delta={self.budget_delta}")
        if self.budget_epsilon is not None:
            self.budget()  # validates the budget and the ledger file
        rel = self.noise
        rel.check_owners(owners=len(self.owner_keys), quorum=self.min_shares if rel.noise_by == "owners" else None)
        self.party_keys()  # validates every key

    def budget(self) -> PrivacyLedger | None:
        """The service's budget ledger (:class:`dpdpca.dp.PrivacyLedger`), or None without a budget."""
        if self.budget_epsilon is None or self.budget_delta is None:
            return None
        path = self.budget_ledger if self.budget_ledger is not None else self.state_dir.parent / "privacy-ledger.json"
        return PrivacyLedger(path, budget_epsilon=self.budget_epsilon, budget_delta=self.budget_delta)

    def party_keys(self) -> PartyKeys:
        """The known parties: ``user`` and ``owner:<id>`` for every listed owner."""
        return PartyKeys(self.owner_keys, self.user_keys, self.tokens)


def _token(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) < 16:
        raise ParameterError(f"{where} must be a string of >= 16 characters, got "
                             f"{'length ' + str(len(value)) if isinstance(value, str) else type(value).__name__}")
    return value


def _unix(value: Any) -> float:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            raise ParameterError(f"protocol.deadline must carry a time zone (e.g. ...Z), got {value.isoformat()}")
        return value.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ParameterError(f"protocol.deadline must be a TOML date-time or unix seconds, got {value!r}")


_LIMIT_KEYS = ("header_timeout_s", "body_timeout_s", "max_connections", "max_header_bytes")


def load_config(path: str | Path) -> ServiceConfig:
    """Read and validate ``proxy.toml``.

    Raises
    ------
    MessageError
        Missing file, not TOML, or a missing table.
    ParameterError
        A value out of range (the message names the key).
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10 with the [server] extra
        import tomli as tomllib
    p = Path(path)
    if not p.is_file():
        raise MessageError(f"config file {str(p)!r} must exist, got no such file")
    try:
        data = tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise MessageError(f"config file {str(p)!r} must be TOML, got {exc}") from None
    except ValueError as exc:  # tomllib: an integer of more than 4300 digits (Python's int-to-str limit)
        raise MessageError(f"config file {str(p)!r} must hold TOML integers of at most 4300 digits, got "
                           f"{str(exc)[:80]}") from None
    base = p.parent
    server, proto = data.get("server", {}), data.get("protocol", {})
    if "public" not in proto:
        raise MessageError(f"config file {str(p)!r} must set protocol.public, got keys {sorted(proto)}")
    user = data.get("user", {})
    if "owner_keys" not in proto or "verify_keys" not in user:
        raise MessageError(f"config file {str(p)!r} must set protocol.owner_keys and user.verify_keys, got "
                           f"protocol keys {sorted(proto)} and user keys {sorted(user)}")

    def path_of(value: Any) -> Path | None:
        return None if value is None else (base / str(value))

    files = proto["owner_keys"] if isinstance(proto["owner_keys"], list) else [proto["owner_keys"]]
    owner_keys = OwnerKeyring.load([base / str(f) for f in files])
    user_keys = OwnerKeyring.load([base / str(user["verify_keys"])])
    if not isinstance(data.get("tokens", {}), dict):
        raise ParameterError(f"tokens must be a table of owner id to bearer token ([tokens]), got "
                             f"{type(data['tokens']).__name__}")  # never the value: it may be a token
    tokens = {f"owner:{oid}": _token(t, f"tokens.{oid}") for oid, t in data.get("tokens", {}).items()}
    if "token" in user:
        tokens[USER] = _token(user["token"], "user.token")

    names = {"epsilon": "epsilon", "delta": "delta", "calibration": "calibration",
             "sensitivity_mode": "sensitivity_mode", "noise_lattice": "noise_lattice", "release_mode": "release",
             "noise_by": "noise_by", "honest_owners": "honest_owners"}
    noise = ReleaseOptions(**{names[k]: proto[k] for k in names if k in proto})
    try:
        return ServiceConfig(
            public_path=base / str(proto["public"]), state_dir=base / str(server.get("state_dir", "proxy-state")),
            owner_keys=owner_keys, user_keys=user_keys, tokens=tokens,
            quorum=int(proto.get("quorum", len(owner_keys))),
            min_shares=int(proto.get("min_shares", 1)),
            deadline=None if "deadline" not in proto else _unix(proto["deadline"]),
            collection_seconds=None if "collection_seconds" not in proto else float(proto["collection_seconds"]),
            noise=noise, release=str(proto.get("release", "on-close")),
            budget_epsilon=None if "budget_epsilon" not in proto else float(proto["budget_epsilon"]),
            budget_delta=None if "budget_delta" not in proto else float(proto["budget_delta"]),
            budget_ledger=base / str(proto.get("budget_ledger", "privacy-ledger.json")),
            max_body_bytes=int(server.get("max_body_bytes", DEFAULT_MAX_BODY)),
            limits=ConnectionLimits(**{k: server[k] for k in _LIMIT_KEYS if k in server}),
            host=str(server.get("host", "127.0.0.1")), port=int(server.get("port", 8443)),
            tls_cert=path_of(server.get("tls_cert")), tls_key=path_of(server.get("tls_key")),
            range_proofs=_flag(proto.get("range_proofs", False), "protocol.range_proofs"),
            public_status=_flag(server.get("public_status", True), "server.public_status"),
            range_proof_mode=proto.get("range_proof_mode", "slack"),
            insecure_test_key=_flag(proto.get("insecure_test_key", False), "protocol.insecure_test_key"))
    except (TypeError, ValueError) as exc:
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"config file {str(p)!r} must have values of the documented types, got {exc}") \
            from None
