"""What every module of the package shares: the loaded library, its errors, text handling."""
import collections

from . import _lib

LIB, LIBRARY_PATH = _lib.load_library()


class HeadscopeError(Exception):
    """A library call failed: .status is the hs_status code (negative), .status_name its
    description ("i/o error", "bad input", ...), and str(e) the library's message."""

    def __init__(self, status, message):
        self.status = status
        self.status_name = LIB.hs_status_str(status).decode()
        super().__init__(message or self.status_name)


HeadscopeError.__module__ = "headscope"


def check(status, err):
    if status != 0:
        raise HeadscopeError(status, err.msg.decode("utf-8", "replace"))


def to_bytes(text, what):
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        return text.encode("utf-8")
    raise TypeError("%s must be str or bytes, not %s" % (what, type(text).__name__))


Tokens = collections.namedtuple("Tokens", ["ids", "tokens", "type_ids"])
Tokens.__module__ = "headscope"
Tokens.__doc__ = """A tokenized text: ids (list of int), tokens (the vocabulary strings, raw:
GPT-2 byte-level as "Ġworld"), type_ids (0 for the text, 1 for the pair)."""


def numpy():
    """NumPy, imported when an array is first made: `import headscope`, tokenize,
    to_str_tokens and analyze work without it."""
    try:
        import numpy as np
    except ImportError:
        raise ImportError("headscope: this call returns NumPy arrays and NumPy is not "
                          "installed: pip install numpy (or apt-get install python3-numpy "
                          "and a venv made with --system-site-packages)") from None
    return np
