"""Typed errors of the assignor: bad input and broken invariants."""


class InvalidGroupState(ValueError):
    """The group state given to an assignor is malformed; the message names the field and value."""


class AssignmentError(AssertionError):
    """An assignment breaks a contract invariant; the message starts with its name (V1..V4, H1, B1, B2)."""
