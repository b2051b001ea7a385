"""The centred (Wang–Chang) release's parties, for the tests that attack and check it.

The library's default is the add/remove release, so these tests name the centred one: ``Proxy`` here is the
library's proxy with ``release="centred"`` unless told otherwise, and :func:`centred_owners` wraps the
conftest's ``make_owner`` factory the same way.
"""

from __future__ import annotations

from typing import Any, Callable

from dpdpca.protocol import Proxy as _Proxy


class Proxy(_Proxy):
    """The centred release's proxy (``release`` may still be given)."""

    def __init__(self, *args: Any, release: str = "centred", **kwargs: Any) -> None:
        super().__init__(*args, release=release, **kwargs)


def centred_owners(make_owner: Callable[..., Any]) -> Callable[..., Any]:
    """The owner factory ``make_owner`` for the centred release unless told otherwise."""
    def make(params: Any, owner_id: str, **kwargs: Any) -> Any:
        kwargs.setdefault("release", "centred")
        return make_owner(params, owner_id, **kwargs)
    return make
