"""RoBERTa's byte-level BPE and ALBERT's SentencePiece (Unigram) tokenizers, run by Hugging Face's
`tokenizers` library from the checkpoint's tokenizer.json.

WordPiece stays hand-written (`bertviz_lite.tokenizer`): it is a lesson. These two are not, so the
library that defines them runs them, and this module only turns its output into the same
`Encoding` (tokens, ids, segments, mask, spans) the rest of bertviz-lite reads.
"""

from __future__ import annotations

import re

from . import families
from .errors import BertVizError, CheckpointError, InputTooLongError
from .tokenizer import Encoding, pad_encoding

# every family's padding token (families.py), the library tokenizers' first: roberta's and albert's <pad>
PAD_TOKENS = tuple(sorted(families.PAD_SPELLINGS, key=lambda t: t.startswith("[")))

# run once at load on every tokenizer.json: a file the library reads but cannot run (a normalizer that
# panics, a pre-tokenizer regex that backtracks past its limit) fails here, not in the first trace
PROBES = (("Hello, world! The cat sat on the mat.", "It purred: 42 times?"),
          ("  caf\u00e9 na\u00efve \u00c0\u00c9\u00ce \u65e5\u672c\u8a9e \U0001f600 tab\tend\n", None),
          ("a" * 40 + "!" + " " * 20 + "b" * 40 + "1" * 20, None))
_PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit)


class TokenizerRunError(BertVizError, ValueError):
    """The tokenizers library failed (or panicked) running a tokenizer.json."""


def _library_failure(e: BaseException) -> str:
    """What the tokenizers library raised, without quoting the file: its type, and where in the JSON."""
    where = re.search(r"at line (\d+) column (\d+)", str(e))
    at = f" at line {where[1]} column {where[2]} of the JSON" if where else ""
    panic = type(e).__name__ == "PanicException"  # pyo3's: a BaseException, so `except Exception` misses it
    return f"{'a panic (PanicException) inside the library' if panic else type(e).__name__}{at}"


def _guarded(call, *args, **kw):
    """call(*args) with anything the library raises, a Rust panic included, as one TokenizerRunError."""
    try:
        return call(*args, **kw)
    except _PASS_THROUGH:
        raise
    except BertVizError:
        raise
    except BaseException as e:  # noqa: B036 - pyo3's PanicException derives from BaseException
        raise TokenizerRunError(_library_failure(e)) from None


def _encode(tok, *args, **kw):
    """tok.encode(...), a failure named as the library's on this text (a later panic the probes missed)."""
    try:
        return _guarded(tok.encode, *args, **kw)
    except TokenizerRunError as e:
        raise TokenizerRunError(f"the tokenizers library failed tokenizing this text ({e}); the model's "
                                "tokenizer.json cannot run it") from None


class LibraryTokenizer:
    """A tokenizer.json tokenizer (BPE, Unigram) with the `encode` of WordPieceTokenizer."""

    def __init__(self, tokenizer, *, pad_token_id: int | None = None):
        self._tok = tokenizer
        _guarded(self._tok.no_truncation)
        _guarded(self._tok.no_padding)
        vocab = _guarded(tokenizer.get_vocab, with_added_tokens=True)
        if pad_token_id is None:
            pad_token_id = next((vocab[t] for t in PAD_TOKENS if t in vocab), None)
        if pad_token_id is None:
            raise BertVizError("the tokenizer has no padding token (<pad> or [PAD])")
        size = _guarded(tokenizer.get_vocab_size, with_added_tokens=True)
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) or not 0 <= pad_token_id < size:
            raise BertVizError(f"pad_token_id {pad_token_id!r} is not a token id of this tokenizer (0..{size - 1})")
        self.pad_token_id = pad_token_id
        self.model_type = type(tokenizer.model).__name__  # BPE, Unigram

    @classmethod
    def from_tokenizer_json(cls, path, **kw) -> "LibraryTokenizer":
        """The tokenizer of a tokenizer.json, checked: read by the library and run once on the probe
        sentences, each step guarded; anything that fails is one CheckpointError naming the file (never
        quoting it: the file may be a link to something else)."""
        from tokenizers import Tokenizer
        try:
            tok = cls(_guarded(Tokenizer.from_file, str(path)), **kw)
        except TokenizerRunError as e:
            raise CheckpointError(f"{path} could not be read by the tokenizers library ({e})") from None
        except BertVizError as e:
            raise CheckpointError(f"{path}: {e}") from None
        try:
            for text, pair in PROBES:
                _guarded(tok._tok.encode, text, pair)  # the library alone first: its failure named plainly
                enc = tok.encode(text, pair, truncate=True)
                bad = [i for i in enc.ids if not 0 <= i < tok.vocab_size]
                if bad:
                    raise TokenizerRunError(f"it gives token ids outside its vocabulary 0..{tok.vocab_size - 1}")
        except TokenizerRunError as e:
            raise CheckpointError(f"{path} loads but the tokenizers library fails running it on a probe "
                                  f"sentence ({e}); the file is damaged or not a tokenizer bertviz-lite can "
                                  "run") from None
        return tok

    @property
    def vocab_size(self) -> int:
        return _guarded(self._tok.get_vocab_size, with_added_tokens=True)

    def token_to_id(self, token: str) -> int:
        i = _guarded(self._tok.token_to_id, token)
        if i is None:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return i

    def id_to_token(self, i: int) -> str:
        t = _guarded(self._tok.id_to_token, int(i))
        if t is None:
            raise IndexError(f"token id {i} is outside the vocabulary 0..{self.vocab_size - 1}")
        return t

    def tokenize(self, text: str) -> list[str]:
        return _encode(self._tok, text, add_special_tokens=False).tokens

    def encode(self, text: str, pair: str | None = None, *, max_length: int = 512, truncate: bool = False,
               pad_to: int | None = None) -> Encoding:
        """The library's encoding (its special tokens and type ids) as an Encoding, truncated and padded
        as WordPieceTokenizer.encode does."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}; pass the sentence itself")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"pair must be a str or None, got {type(pair).__name__}")
        enc = _encode(self._tok, text, pair)
        full, truncated = len(enc.ids), 0
        if full > max_length:
            if not truncate:
                raise InputTooLongError(f"the input is {full} tokens but the model takes at most {max_length} "
                                        "(special tokens included); shorten the text or pass truncate=True")
            _guarded(self._tok.enable_truncation, max_length, strategy="longest_first")
            try:
                enc = _encode(self._tok, text, pair)
            finally:
                _guarded(self._tok.no_truncation)
            truncated = full - len(enc.ids)
        tokens, ids, segments = list(enc.tokens), list(enc.ids), list(enc.type_ids)
        spans = [None if s is None or special else (s, a, b)
                 for s, special, (a, b) in zip(enc.sequence_ids, enc.special_tokens_mask, enc.offsets)]
        enc = Encoding(tokens, ids, segments, [1] * len(ids), spans, len(ids), truncated)
        return enc if pad_to is None else pad_encoding(enc, pad_to, self.pad_token_id,
                                                       self.id_to_token(self.pad_token_id), max_length=max_length)
