"""The Wang-Chang three-party protocol: owners, proxy, data user.

Owners encrypt their scatter shares, the proxy aggregates, masks and adds DP
noise under encryption, and the data user decrypts ``S_bar + G'`` exactly and
runs PCA (Wang & Chang, Sec. IV; ``docs/architecture.md``, "The protocol in
integers").  Composes :mod:`dpdpca.crypto` and :mod:`dpdpca.dp`.
"""

from dpdpca.protocol.config import DeclaredBounds, Deployment, KeyOptions, ProtocolOptions, ReleaseOptions
from dpdpca.protocol.estimator import DPDPCA
from dpdpca.protocol.messages import Message, MessageType
from dpdpca.protocol.params import ProtocolParams, slot_value_bound
from dpdpca.protocol.owner import DataOwner
from dpdpca.protocol.proxy import Proxy
from dpdpca.protocol.user import DataUser
from dpdpca.protocol.runner import ProtocolRun, run_pipeline, run_protocol
from dpdpca.protocol.transport import FileTransport, InProcessTransport, PipeTransport, Transport

__all__ = [
    "DPDPCA", "run_protocol", "run_pipeline", "ProtocolRun", "ProtocolOptions", "ReleaseOptions", "KeyOptions",
    "DeclaredBounds", "Deployment",
    "DataOwner", "Proxy", "DataUser", "ProtocolParams", "slot_value_bound",
    "Message", "MessageType", "Transport", "InProcessTransport", "FileTransport", "PipeTransport",
]
