"""Errors that carry what a user needs to fix their input."""

from __future__ import annotations


class _Missing:
    def __repr__(self) -> str:
        return "nothing"


MISSING = _Missing()  # the "found" of a required field that is absent


class SpecError(ValueError):
    """A search space (or a path given on the command line) is wrong.

    The message always names the field, what was expected and what was found, on one line.
    """

    def __init__(self, field: str, expected: str, found: object, hint: str = "") -> None:
        self.field = field
        self.expected = expected
        self.found = found
        self.hint = hint
        msg = f"{field}: expected {expected}, found {found!r}"
        if hint:
            msg += f" ({hint})"
        super().__init__(msg)
