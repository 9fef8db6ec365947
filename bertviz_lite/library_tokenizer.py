"""RoBERTa's byte-level BPE and ALBERT's SentencePiece (Unigram) tokenizers, run by Hugging Face's
`tokenizers` library from the checkpoint's tokenizer.json.

WordPiece stays hand-written (`bertviz_lite.tokenizer`): it is a lesson. These two are not, so the
library that defines them runs them, and this module only turns its output into the same
`Encoding` (tokens, ids, segments, mask, spans) the rest of bertviz-lite reads.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
import sys
import tempfile
import threading

from . import families
from .errors import BertVizError, CheckpointError, InputTooLongError
from .tokenizer import Encoding, _truncation_lengths, pad_encoding, read_json_file

# every family's padding token (families.py), the library tokenizers' first: roberta's and albert's <pad>
PAD_TOKENS = tuple(sorted(families.PAD_SPELLINGS, key=lambda t: t.startswith("[")))

# run once at load on every tokenizer.json: a file the library reads but cannot run (a normalizer that
# panics, a pre-tokenizer regex that backtracks past its limit) fails here, not in the first trace
PROBES = (("Hello, world! The cat sat on the mat.", "It purred: 42 times?"),
          ("  caf\u00e9 na\u00efve \u00c0\u00c9\u00ce \u65e5\u672c\u8a9e \U0001f600 tab\tend\n", None),
          ("a" * 40 + "!" + " " * 20 + "b" * 40 + "1" * 20, None))
_PASS_THROUGH = (KeyboardInterrupt, SystemExit, GeneratorExit)
# N17: how much of a text the library reads. English averages about 4 characters a piece; a text with fewer
# pieces per character than 1 in 16 is read in growing budgets (_read)
CHARS_PER_TOKEN = 16
CUT_MARGIN = 64  # characters before a cut whose pieces may differ from the whole text's: not trusted
# the longest string a normalizer, pre-tokenizer or post-processor may hold (a Replace's content, a Prepend,
# a regex): the library adds them to every text, so a long one multiplies every text (a 1,000,000-character
# Prepend reached 23 GB at load). Real files hold a character or a short regex; SentencePiece's precompiled
# character map is a table, not text: exempt here, its replacement strings count in MAX_GROWTH
MAX_STEP_STRING = 1000
TEXT_STEPS = ("normalizer", "pre_tokenizer", "post_processor")
# how many times longer a normalizer's Replace steps and precompiled character maps may make a text, all together:
# a few short strings each within MAX_STEP_STRING would still multiply (" " -> 999 spaces, twice: a million times).
# Real files: ALBERT's Replace steps shrink or keep a text; SentencePiece's map turns a character into at most 18
MAX_GROWTH = 64


def oversized_step(d) -> str | None:
    """Why a tokenizer.json's normalizer, pre-tokenizer or post-processor cannot be run safely (a string longer
    than MAX_STEP_STRING characters, or a list longer than MAX_STEP_STRING items, anywhere in it), or None."""
    if not isinstance(d, dict):
        return None  # the library names what is wrong with the file
    stack = [(d.get(step), step) for step in TEXT_STEPS]
    while stack:
        x, where = stack.pop()
        if isinstance(x, dict):
            stack += [(v, f"{where}.{k if re.fullmatch('[A-Za-z_]{1,40}', k) else '?'}") for k, v in x.items()
                      if k != "precompiled_charsmap"]  # (a key that is not a plain name is not quoted)
        elif isinstance(x, list):
            if len(x) > MAX_STEP_STRING:
                return (f"its {where} holds a list of {len(x):,} items (bertviz-lite runs at most "
                        f"{MAX_STEP_STRING:,}): the file is damaged or not a tokenizer bertviz-lite can run")
            stack += [(v, f"{where}[{i}]") for i, v in enumerate(x)]
        elif isinstance(x, str) and len(x) > MAX_STEP_STRING:
            return (f"its {where.split('.')[0]} holds a {len(x):,}-character string (at {where[:120]}); "
                    f"bertviz-lite refuses strings over {MAX_STEP_STRING:,} characters there, since the library "
                    "would add such a string to every text and could fill the memory: the file is damaged or not "
                    "a tokenizer bertviz-lite can run")
    try:
        growth, steps = _normalizer_growth(d.get("normalizer"))
    except ValueError as e:
        return (f"its normalizer's precompiled character map (SentencePiece's) cannot be read ({e}): the file is "
                "damaged or not a tokenizer bertviz-lite can run")
    if growth > MAX_GROWTH:
        return (f"its normalizer's {' and '.join(steps)} can make a text {growth:,.0f} times longer (bertviz-lite "
                f"runs at most {MAX_GROWTH}x): every text would grow so before tokenizing and could fill the memory; "
                "the file is damaged or not a tokenizer bertviz-lite can run")
    return None


def _normalizer_growth(normalizer) -> tuple[float, list[str]]:
    """The most a normalizer can multiply a text's length, and the kinds of step that do: the product, over every
    Replace in it, of its content's length over its pattern's (a regex pattern may match one character), and
    over every Precompiled, of its longest replacement (one character may become it)."""
    growth, steps, stack = 1.0, set(), [normalizer]
    while stack:
        x = stack.pop()
        if isinstance(x, list):
            stack += x
        elif isinstance(x, dict):
            if x.get("type") == "Replace" and isinstance(x.get("content"), str):
                pattern = x.get("pattern")
                plain = pattern.get("String") if isinstance(pattern, dict) else None
                growth *= max(1, len(x["content"])) / max(1, len(plain) if isinstance(plain, str) else 1)
                steps.add("Replace steps")
            elif x.get("type") == "Precompiled" and "precompiled_charsmap" in x:
                growth *= max(1, _longest_replacement(x["precompiled_charsmap"]))
                steps.add("precompiled character map")
            stack += [v for v in x.values() if isinstance(v, (dict, list))]
    return growth, sorted(steps, reverse=True)  # "Replace steps" first


def _longest_replacement(charsmap) -> int:
    """The longest string, in characters, SentencePiece's precompiled character map replaces a match with. The
    map (base64) is a little-endian u32 trie size, the trie, then the replacements, each ended by a NUL (the
    trie points into them; a suffix is never longer than its string). ValueError if it is not such a map."""
    if not isinstance(charsmap, str):
        raise ValueError(f"a base64 string is expected, got {type(charsmap).__name__}")
    try:
        blob = base64.b64decode(charsmap, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("it is not base64") from None
    trie_size = int.from_bytes(blob[:4], "little")
    if len(blob) < 4 or trie_size > len(blob) - 4:
        raise ValueError(f"its trie of {trie_size:,} bytes is longer than the map's {len(blob):,}")
    strings = blob[4 + trie_size:].split(b"\0")
    return max(len(t.decode("utf-8", "replace")) for t in strings)


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


_STDERR_LOCK = threading.Lock()  # fd 2 is the process's: one redirection at a time
_HELD: dict = {}  # process id -> the temporary file fd 2 goes to (one per process, made on first use)


def _held_file():
    """This process's temporary file for fd 2, emptied (made once: a new one per call cost ~0.3 ms)."""
    held = _HELD.get(os.getpid())
    if held is None:
        _HELD.clear()  # a forked child does not share its parent's file (nor its offset)
        held = _HELD[os.getpid()] = tempfile.TemporaryFile()
    held.seek(0)
    held.truncate()
    return held


@contextlib.contextmanager
def _panic_text_dropped():
    """fd 2 into a temporary file while the library runs text (N32): a Rust panic's message, and with
    RUST_BACKTRACE=1 its ~60-line backtrace, are written by Rust's panic hook straight to fd 2, past any
    `except`, in the CLI too. When the call fails what was written is dropped (the failure becomes one
    TokenizerRunError); otherwise it is written back to fd 2."""
    with _STDERR_LOCK:
        try:  # no fd 2 (a daemon) or no temporary folder: run as is rather than fail the tokenization
            held = _held_file()
            saved = os.dup(2)
        except OSError:
            held = None
        if held is None:
            yield
            return
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os.dup2(held.fileno(), 2)
        failed = True
        try:
            yield
            failed = False
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if not failed and held.tell():
                held.seek(0)
                os.write(2, held.read())


def _run_text(call, *args, **kw):
    """_guarded(call, ...) for a call that runs text through the library (it may panic): a panic prints nothing."""
    with _panic_text_dropped():
        return _guarded(call, *args, **kw)


def _encode(tok, *args, **kw):
    """tok.encode(...), a failure named as the library's on this text (a later panic the probes missed)."""
    try:
        return _run_text(tok.encode, *args, **kw)
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
        text, d = read_json_file(path)  # bounded, and named if it is not a file of UTF-8 JSON
        why = oversized_step(d)
        if why:
            raise CheckpointError(f"{path}: {why}")
        try:
            tok = cls(_run_text(Tokenizer.from_str, text), **kw)
        except TokenizerRunError as e:
            raise CheckpointError(f"{path} could not be read by the tokenizers library ({e})") from None
        except BertVizError as e:
            raise CheckpointError(f"{path}: {e}") from None
        try:
            for text, pair in PROBES:  # (encode reads a bounded part of each text, as every trace does)
                _run_text(tok._tok.encode, text, pair)  # the library alone first: its failure named plainly
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
        as WordPieceTokenizer.encode does.

        The library never sees more of a text than can matter (N17): each text is cut to a character budget
        that still holds the first max_length pieces (`_read`), and truncation is done here, by
        `_truncation_lengths` (the library's longest_first rule), on the library's untruncated encoding of the
        cut texts: its own truncation builds every overflowing piece of a pair (1.3 GB to keep 40 tokens).
        A text that fits the budget is read whole, so the result is the library's own. When a text is cut
        before tokenizing, `truncated` counts the pieces dropped from the part read, and when both texts of a
        pair are over the budget, the odd piece of an odd budget goes to the one with more pieces read (the
        library gives it to the one with more pieces in all)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}; pass the sentence itself")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"pair must be a str or None, got {type(pair).__name__}")
        n_special = _guarded(self._tok.num_special_tokens_to_add, pair is not None)
        budget = max_length - n_special  # pieces of the texts that fit beside the special tokens
        texts = [text] if pair is None else [text, pair]
        enc, read = self._read(texts, max(budget, 0) + 1)
        sides = enc.sequence_ids  # 0 (text), 1 (pair), None (the post-processor's special tokens)
        counts = [sides.count(s) for s in range(len(texts))]
        whole = [r is None for r in read]
        if not all(whole) or sum(counts) + n_special > max_length:
            if not truncate:
                size = f"{sum(counts) + n_special}" if all(whole) else f"more than {max_length}"
                raise InputTooLongError(f"the input is {size} tokens but the model takes at most {max_length} "
                                        "(special tokens included); shorten the text or pass truncate=True")
            if budget < 0:
                raise ValueError(f"max_length={max_length} leaves no room for the {n_special} special tokens")
            # a text read in part counts as the pieces read (more than budget): longest_first's result is the
            # same, except which text gets the odd piece of an odd budget when both are over it
            known = [n if r is None else r for n, r in zip(counts, read)]
            keep = _truncation_lengths(known[0], known[1] if pair is not None else None, budget)
            rank = [0, 0]
            kept = []
            for i, s in enumerate(sides):
                if s is None or rank[s] < keep[s]:
                    kept.append(i)
                if s is not None:
                    rank[s] += 1
        else:
            kept = range(len(sides))
        tokens, ids, segments = enc.tokens, enc.ids, enc.type_ids
        spans = [None if s is None or special else (s, a, b)
                 for s, special, (a, b) in zip(sides, enc.special_tokens_mask, enc.offsets)]
        out = Encoding(*([x[i] for i in kept] for x in (tokens, ids, segments)), [1] * len(kept),
                       [spans[i] for i in kept], len(kept), sum(counts) + n_special - len(kept))
        return out if pad_to is None else pad_encoding(out, pad_to, self.pad_token_id,
                                                       self.id_to_token(self.pad_token_id), max_length=max_length)

    def _read(self, texts: list[str], need: int):
        """(the library's encoding of the texts, each cut to a character budget; for each text, None when it was
        read whole, else how many of its first pieces are trusted, at least `need`).

        A text longer than CHARS_PER_TOKEN characters per needed piece is cut, at the start of a white-space
        run where one lies in the last CUT_MARGIN characters (where BPE's and SentencePiece's pre-tokenizers
        split too), and its pieces are trusted up to CUT_MARGIN characters before the cut; if fewer than `need`
        are, its budget grows fourfold (up to the whole text). So the work is bounded by the text's first
        `need` pieces, not by its length."""
        limits = [need * CHARS_PER_TOKEN] * len(texts)
        while True:
            cuts = [_cut(t, limit) for t, limit in zip(texts, limits)]
            enc = _encode(self._tok, *(t[:c] for t, c in zip(texts, cuts)))
            read = [None if c == len(t) else _pieces_before(enc, s, c - CUT_MARGIN)
                    for s, (t, c) in enumerate(zip(texts, cuts))]
            short = [s for s, r in enumerate(read) if r is not None and r < need]
            if not short:
                return enc, read
            for s in short:
                limits[s] *= 4


def _cut(text: str, limit: int) -> int:
    """Where to cut a text to about `limit` characters: len(text) when it fits, else before the last white-space
    run that starts within CUT_MARGIN characters of the limit, else at the limit."""
    if len(text) <= limit:
        return len(text)
    for p in range(limit, max(limit - CUT_MARGIN, 0), -1):
        if text[p].isspace() and not text[p - 1].isspace():
            return p
    return limit


def _pieces_before(enc, side: int, end: int) -> int:
    """How many of the encoding's first pieces of text `side` end at or before character `end`."""
    n = 0
    for s, (_, b) in zip(enc.sequence_ids, enc.offsets):
        if s == side:
            if b > end:
                break
            n += 1
    return n
