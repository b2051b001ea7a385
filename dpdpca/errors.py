"""Exception hierarchy shared by every layer of dpdpca.

Every error raised on purpose by dpdpca derives from :class:`DpdpcaError`, and
also from the builtin that describes its kind, so callers may catch either: a
parameter of the wrong *type* (``epsilon="1"``, ``n_components=2.5``) raises
:class:`ParameterTypeError`, a ``TypeError``; a value outside its range, bad
data or a protocol violation raises a ``ValueError`` subclass
(:class:`ParameterError`, :class:`DataError`, ...).  Messages are one line and name
the parameter, the constraint and the value received, e.g.
``epsilon must be > 0, got -1.0``.  The CLI prints that line and exits non-zero.
"""

from __future__ import annotations

__all__ = [
    "DpdpcaError",
    "ParameterError",
    "DataError",
    "OverflowRiskError",
    "KeyMismatchError",
    "MessageError",
    "InsecureKeyError",
    "InfeasibleError",
    "UnsupportedSettingError",
    "ProtocolError",
    "NotFittedError",
    "ParameterTypeError",
    "AuthenticationError",
    "ImplausibleReleaseError",
    "FileAccessError",
    "MissingDependencyError",
    "ProofError",
    "BudgetExceededError",
]


class DpdpcaError(Exception):
    """Root of every error dpdpca raises deliberately."""


class ParameterError(DpdpcaError, ValueError):
    """A parameter is outside its documented range."""


class DataError(DpdpcaError, ValueError):
    """Input data violates the data contract (NaN, wrong shape, norm > 1, empty...)."""


class OverflowRiskError(DpdpcaError, ValueError):
    """A plaintext or a packed slot could leave its range; raised *before* computing."""


class KeyMismatchError(DpdpcaError, ValueError):
    """Ciphertexts or messages made under a different key were combined."""


class MessageError(DpdpcaError, ValueError):
    """A serialized message is truncated, tampered with, or of an unknown version."""


class InsecureKeyError(ParameterError):
    """A key below the secure size was requested without explicit consent."""


class InfeasibleError(ParameterError):
    """Constraints on noise variances (e.g. CAPE's) cannot be met."""


class UnsupportedSettingError(ParameterError):
    """A method has no sound form under the privacy setting asked for (a relation, calibration or sensitivity mode).

    ``dpdpca compare`` shows such a method as skipped, with this message as the reason.
    """


class ProtocolError(DpdpcaError, ValueError):
    """A protocol round was run out of order, replayed, or duplicated."""


class NotFittedError(DpdpcaError, ValueError, AttributeError):
    """An estimator was used (``transform``, ...) before ``fit``; the same in every estimator.

    Also an ``AttributeError``, as scikit-learn's ``NotFittedError``.
    """


class ParameterTypeError(DpdpcaError, TypeError):
    """A parameter has the wrong type (e.g. ``epsilon="1"``); a wrong *value* is a :class:`ParameterError`."""


class AuthenticationError(ProtocolError):
    """A signed statement is unsigned, signed by an unknown party, or its signature does not verify."""


class ImplausibleReleaseError(ProtocolError):
    """A decrypted release fails a check the public bounds imply (a poisoned or overflowing share); nothing is published.

    ``check`` names the check that failed (e.g. ``"trace"``, ``"slot range"``).
    """

    check: str = ""


class FileAccessError(DpdpcaError, OSError):
    """A file dpdpca was asked to read or write is missing, too large, unreadable or unwritable."""


class MissingDependencyError(DpdpcaError, ImportError):
    """An optional extra (e.g. ``[server]``) is needed and not installed; the message names it."""


class ProofError(ProtocolError):
    """A zero-knowledge proof does not verify (wrong statement, context, or a cheating prover).

    ``party``: who sent the proof, when known (the proxy excludes that owner from the session).
    """

    party: str | None = None


class BudgetExceededError(DpdpcaError, ValueError):
    """A release would pass the ledger's declared total budget."""
