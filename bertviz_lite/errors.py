"""Errors bertviz-lite raises: each names what was wrong and what to do."""

import operator


def as_int(value, what: str) -> int:
    """Any integer (python's or numpy's, through operator.index) as an int; TypeError naming `what` for
    bools, floats, strings and the rest."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}")


def as_bool(value, what: str) -> bool:
    """True or False (numpy's bool too) as a bool; TypeError naming `what` for anything else ('no', None, 0)."""
    if isinstance(value, bool) or type(value).__name__ in ("bool", "bool_"):  # numpy 2 names its own "bool"
        return bool(value)
    raise TypeError(f"{what} must be True or False, got {type(value).__name__} {value!r}")


class BertVizError(Exception):
    """Base class for every error bertviz-lite raises on purpose."""


class InputTooLongError(BertVizError, ValueError):
    """The tokenized input is longer than the model's position table allows."""


class OutOfRangeError(BertVizError, IndexError):
    """A layer, head or token index outside the model's range."""


class TraceTooLargeError(BertVizError, MemoryError):
    """The trace asked for would not fit in the memory budget."""


class CheckpointError(BertVizError, ValueError):
    """A checkpoint does not fit the model: every problem is listed by key."""


class WeightsNotFoundError(BertVizError, OSError):
    """Weights could not be found locally and could not be downloaded."""


class BackendError(BertVizError, RuntimeError):
    """The requested array backend (cupy, array_api_strict) is not usable here."""


class PatternError(BertVizError, KeyError):
    """A keep=, edits= or patch= pattern that matches no trace key of the model."""

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0]) if self.args else ""


class EditError(BertVizError, ValueError):
    """An edit that cannot be applied: wrong shape, dtype or values, or a patch from a trace that does not fit."""


class ModelTooLargeError(BertVizError, MemoryError):
    """A config whose weights could not fit in this machine's memory (refused before allocating)."""


class NotARegularFileError(BertVizError, OSError):
    """An export target that exists and is not a regular file (a device, a FIFO, a socket, a dangling link)."""
