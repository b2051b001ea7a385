"""Which error a validation message belongs to (shared by the dp tests)."""

from __future__ import annotations

import re

from dpdpca.errors import ParameterError, ParameterTypeError


def error_for(match: str) -> type:
    """A wrong type is a ParameterTypeError (a TypeError); a wrong value a ParameterError (a ValueError)."""
    return ParameterTypeError if re.search(r"must be (a real number|an integer)\$?,? got", match) else ParameterError
