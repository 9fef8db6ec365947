"""Uncased BERT WordPiece, written out by hand because it is a lesson.

It reproduces what Hugging Face's `BertTokenizerFast` (the `tokenizers` library) does, step by
step, while remembering where every character came from so that each token keeps its
character span in the original text (for highlighting):

  0. special tokens a user writes literally ([CLS], [SEP], [PAD], [UNK], [MASK]) are cut out
     of the raw text first, case-sensitively, and kept as they are;
  1. clean: NUL, U+FFFD and control/format characters (Unicode categories Cc, Cf, Co, Cs,
     except tab/newline/return) are dropped; every white-space character becomes " ";
  2. CJK ideographs are surrounded by spaces, so each becomes a word of its own;
  3. strip accents: canonical decomposition (NFD), then drop non-spacing marks (Mn);
  4. lower-case, one character at a time (Rust's char::to_lowercase: no final-sigma rule);
  5. pre-tokenize: split on white space, and cut every punctuation character out as a word;
  6. WordPiece: greedy longest-match-first against the vocabulary, continuations
     prefixed "##"; a word that cannot be covered, or is over 100 characters, is [UNK];
  7. the model input: [CLS] A [SEP] (B [SEP]), segment ids 0 for A and 1 for B, then
     optional truncation and [PAD] padding (mask 0).

tests/loading/test_tokenizer.py checks this file against `tokenizers` on hundreds of hard strings
and on random text (hypothesis), token by token and span by span.
"""
from __future__ import annotations

import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from .config import _short
from .errors import BertVizError, CheckpointError, InputTooLongError, as_int

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
# the largest tokenizer.json of a published BERT-family model is a few MB (multilingual ones under 20 MB): a
# larger file is refused before it is read (600 MB was a raw MemoryError)
MAX_JSON_BYTES = 64 * 2**20
# a longer word is [UNK]: BERT's files say 100; greedy longest-match costs about len(word)^2.7, so a file's value
# is held to what real files use (10**9 made one 30,000-character word take over a minute)
MAX_CHARS_PER_WORD = 1000



# Unicode's White_Space property (what Rust's char::is_whitespace tests).  Python's
# str.isspace() differs: it also counts U+001C..U+001F, which BERT drops as control characters.
WHITE_SPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                        "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")

# The CJK blocks BERT splits into single characters (the "Chinese characters" of the original code).
# `tokenizers` starts CJK Extension E at 0x2B920 where Google's BERT has 0x2B820: we follow `tokenizers`.
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _load_overrides() -> dict[str, dict]:
    """Characters whose Unicode category or case changed between the Unicode version of
    `tokenizers`' tables and this Python's; scripts/make_unicode_table.py writes the file."""
    d = json.loads((resources.files("bertviz_lite") / "data" / "unicode_overrides.json").read_text("utf-8"))
    return {k: {chr(int(cp)): v for cp, v in d[k].items()}
            for k in ("control", "whitespace", "punctuation", "mark", "strip", "lower")}


OVERRIDES = _load_overrides()


def is_whitespace(ch: str) -> bool:
    return OVERRIDES["whitespace"].get(ch, ch in WHITE_SPACE)


def is_control(ch: str) -> bool:
    """Control, format, private-use or surrogate; tab/newline/return count as white space.

    Unassigned code points (Cn) are kept, as `tokenizers` keeps them.
    """
    if ch in OVERRIDES["control"]:
        return OVERRIDES["control"][ch]
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def is_punctuation(ch: str) -> bool:
    """Every ASCII non-alphanumeric printable ($, +, ^, ` ... too) and every Unicode P* category."""
    if ch in OVERRIDES["punctuation"]:
        return OVERRIDES["punctuation"][ch]
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def lower(ch: str) -> str:
    """One character lower-cased (possibly into two, e.g. U+0130 -> i + combining dot)."""
    return OVERRIDES["lower"].get(ch) or ch.lower()


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


@dataclass(frozen=True)
class Encoding:
    """The exact model input for one text (or pair).

    spans[i] is (which_text, start, end): token i covers texts[which_text][start:end];
    None for [CLS], [SEP] and [PAD], which the user did not write.
    """
    tokens: list
    ids: list
    segments: list
    mask: list
    spans: list
    n_real: int        # tokens before padding
    truncated: int     # word pieces dropped by truncate=True (0 when nothing was cut)

    def __len__(self) -> int:
        return len(self.ids)


def read_json_file(path) -> tuple[str, object]:
    """(text, parsed JSON) of a tokenizer file, checked before it is read whole: a regular file (a FIFO would
    block), at most MAX_JSON_BYTES, UTF-8, complete JSON. Each failure is a CheckpointError naming the file
    for what it is, never quoting it (it may link to another file)."""
    try:  # O_NONBLOCK: opening a FIFO returns at once, and fstat below names it
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise CheckpointError(f"{path} could not be read ({e.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        kind = ("a folder" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise CheckpointError(f"{path} is not a regular file ({kind}): put the model's JSON file there")
    with os.fdopen(fd, "rb") as f:
        size = st.st_size
        if size > MAX_JSON_BYTES:
            raise CheckpointError(f"{path} is {size / 2**20:,.0f} MiB; bertviz-lite reads tokenizer files of at "
                                  f"most {MAX_JSON_BYTES // 2**20} MiB (published ones are a few MB): the file is "
                                  "damaged or not a BERT-family tokenizer")
        data = f.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path} grew past {MAX_JSON_BYTES // 2**20} MiB while it was read")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{path} is not UTF-8 text (byte {e.start:,} is not UTF-8): a tokenizer file is "
                              "UTF-8 JSON; the file is damaged or another kind of file") from None
    try:
        return text, json.loads(text)
    except RecursionError:
        raise CheckpointError(f"{path}: its JSON is nested too deeply to read") from None
    except json.JSONDecodeError as e:
        cut = e.pos >= len(text.rstrip())  # the error is at the end: the text stops mid-way
        raise CheckpointError(f"{path} is not complete JSON ({e.msg} at line {e.lineno} column {e.colno})"
                              + ("; the file ends there, so it looks cut short (an interrupted download?): "
                                 "download it again" if cut else "")) from None


def _chars_per_word(value) -> int:
    """max_input_chars_per_word checked: a whole number 1 .. MAX_CHARS_PER_WORD."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_CHARS_PER_WORD:
        raise BertVizError(f"max_input_chars_per_word must be a whole number 1 to {MAX_CHARS_PER_WORD:,} (BERT's "
                           f"files give 100: a longer word becomes [UNK]), got {type(value).__name__} {_short(value)}")
    return value


class WordPieceTokenizer:
    """BERT's WordPiece tokenizer over a vocabulary (a list of tokens, index = id)."""

    def __init__(self, vocab, *, do_lower_case: bool = True, strip_accents: bool | None = None,
                 tokenize_chinese_chars: bool = True, clean_text: bool = True,
                 max_input_chars_per_word: int = 100, unk_token: str = "[UNK]", prefix: str = "##",
                 special_tokens=SPECIAL_TOKENS):
        self.vocab = list(vocab)
        self.token_ids = {t: i for i, t in enumerate(self.vocab)}
        if len(self.token_ids) != len(self.vocab):
            raise BertVizError("the vocabulary lists a token twice; every line of vocab.txt must be unique")
        self.do_lower_case = do_lower_case
        # like `tokenizers`: strip_accents=None means "strip when lower-casing"
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents
        self.tokenize_chinese_chars = tokenize_chinese_chars
        self.clean_text = clean_text
        self.max_input_chars_per_word = _chars_per_word(max_input_chars_per_word)
        self.unk_token, self.prefix = unk_token, prefix
        self.special_tokens = tuple(t for t in special_tokens if t in self.token_ids)
        self.absent_special = tuple(t for t in special_tokens if t not in self.token_ids)  # e.g. no [MASK]
        missing = [t for t in ("[CLS]", "[SEP]", "[PAD]", unk_token) if t not in self.token_ids]
        if missing:
            raise BertVizError(f"the vocabulary has no {', '.join(missing)}: it is not a BERT WordPiece vocabulary")
        # longest first, so that a special token that is a prefix of another never wins
        alternatives = sorted(self.special_tokens, key=len, reverse=True)
        self._special_re = re.compile("|".join(map(re.escape, alternatives)))

    # --- constructors
    @classmethod
    def from_vocab_file(cls, path, **kw) -> "WordPieceTokenizer":
        """vocab.txt: one token per line, the line number is the id."""
        with open(path, encoding="utf-8") as f:
            vocab = [line.rstrip("\n").rstrip("\r") for line in f]
        while vocab and vocab[-1] == "":
            vocab.pop()  # a trailing newline is not a token
        return cls(vocab, **kw)

    @classmethod
    def from_tokenizer_json(cls, path) -> "WordPieceTokenizer":
        """A `tokenizers` tokenizer.json with a BertNormalizer and a WordPiece model."""
        _, d = read_json_file(path)
        model, norm = d.get("model") or {}, d.get("normalizer") or {}
        if model.get("type") != "WordPiece":
            raise BertVizError(f"{path} describes a {model.get('type')!r} tokenizer; bertviz-lite reads "
                               "BERT WordPiece tokenizers only")
        if norm and norm.get("type") != "BertNormalizer":
            raise BertVizError(f"{path} uses a {norm.get('type')!r} normalizer; bertviz-lite implements "
                               "BERT's (BertNormalizer)")
        ids = model["vocab"]
        if not isinstance(ids, dict) or not ids:
            raise BertVizError(f"{path}: its WordPiece vocabulary must be a non-empty object of token: id entries")
        wrong = [i for i in ids.values() if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(ids)]
        if wrong:  # N33: checked before the id table is built (an id of 10**12 was a raw MemoryError)
            bad = wrong[0]
            raise BertVizError(f"{path}: its vocabulary of {len(ids):,} tokens gives a token the id "
                               f"{_short(bad)}; the ids must be the whole numbers 0..{len(ids) - 1}, each once")
        vocab = [None] * len(ids)
        for token, i in ids.items():
            vocab[i] = token
        if any(t is None for t in vocab):
            raise BertVizError(f"{path}: the vocabulary's ids have gaps; it is not a complete WordPiece vocabulary")
        specials = [a["content"] for a in d.get("added_tokens", []) if a.get("special")] or SPECIAL_TOKENS
        return cls(vocab, do_lower_case=norm.get("lowercase", True), strip_accents=norm.get("strip_accents"),
                   tokenize_chinese_chars=norm.get("handle_chinese_chars", True),
                   clean_text=norm.get("clean_text", True),
                   max_input_chars_per_word=model.get("max_input_chars_per_word", 100),
                   unk_token=model.get("unk_token", "[UNK]"), prefix=model.get("continuing_subword_prefix", "##"),
                   special_tokens=specials)

    @classmethod
    def bert_base_uncased(cls) -> "WordPieceTokenizer":
        """The bert-base-uncased vocabulary (30,522 tokens) shipped in bertviz_lite/data/vocab.txt."""
        with resources.as_file(resources.files("bertviz_lite") / "data" / "vocab.txt") as path:
            return cls.from_vocab_file(Path(path))

    # --- vocabulary
    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def token_to_id(self, token: str) -> int:
        return self.token_ids.get(token, self.token_ids[self.unk_token])

    def id_to_token(self, i: int) -> str:
        if not 0 <= int(i) < len(self.vocab):
            raise IndexError(f"token id {i} is outside the vocabulary 0..{len(self.vocab) - 1}")
        return self.vocab[int(i)]

    # --- steps 1-4: normalisation, character by character, each keeping its source index
    def normalize(self, text: str, offset: int = 0) -> list[tuple[str, int]]:
        """[(normalized character, index of the original character it came from)]."""
        chars = []
        for i, ch in enumerate(text, start=offset):
            if self.clean_text:
                if ch in "\x00\ufffd" or is_control(ch):
                    continue                                   # 1. drop control characters
                if is_whitespace(ch):
                    ch = " "                                   # 1. any white space -> " "
            if self.tokenize_chinese_chars and is_cjk(ch):
                chars += [(" ", i), (ch, i), (" ", i)]         # 2. a CJK ideograph is a word
            else:
                chars.append((ch, i))
        if self.strip_accents:
            chars = _strip_accents(chars)                     # 3. NFD, drop Mn marks
        if self.do_lower_case:
            chars = [(low, i) for ch, i in chars for low in lower(ch)]  # 4. per character
        return chars

    # --- step 5: words
    @staticmethod
    def pre_tokenize(chars: list[tuple[str, int]]) -> list[list[tuple[str, int]]]:
        """Split on white space; every punctuation character is a word of its own."""
        words, word = [], []
        for ch, i in chars:
            if is_whitespace(ch) or is_punctuation(ch):
                if word:
                    words.append(word)
                word = []
                if not is_whitespace(ch):
                    words.append([(ch, i)])
            else:
                word.append((ch, i))
        if word:
            words.append(word)
        return words

    # --- step 6: word pieces
    def wordpiece(self, word: str) -> list[tuple[str, int, int]] | None:
        """Greedy longest-match-first: [(piece, start, end)] over the word's characters, or None."""
        if len(word) > self.max_input_chars_per_word:
            return None
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:                                 # the longest piece in the vocabulary
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.token_ids:
                    break
                end -= 1
            else:
                return None                                    # nothing matches: the word is [UNK]
            pieces.append((piece, start, end))
            start = end
        return pieces

    def tokenize_with_spans(self, text: str) -> list[tuple[str, int, int]]:
        """Word pieces of one text, each with its (start, end) character span in `text`."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        absent = [t for t in self.absent_special if t in text]
        if absent:  # N14: it became [UNK] [UNK] [UNK] (the pieces of "[", "mask", "]") without a word
            raise ValueError(f"the text writes {absent[0]}, a special token this vocabulary does not have (it "
                             f"would become {' '.join([self.unk_token] * 3)}); remove it, or load a model whose "
                             f"vocabulary has {absent[0]}")
        out, pos = [], 0
        for m in [*self._special_re.finditer(text), None]:    # 0. literal special tokens
            stop = m.start() if m else len(text)
            for word in self.pre_tokenize(self.normalize(text[pos:stop], offset=pos)):
                src = [i for _, i in word]
                pieces = self.wordpiece("".join(ch for ch, _ in word))
                if pieces is None:
                    out.append((self.unk_token, src[0], src[-1] + 1))
                else:
                    out += [(p, src[s], src[e - 1] + 1) for p, s, e in pieces]
            if m:
                out.append((m.group(), m.start(), m.end()))
                pos = m.end()
        return out

    def tokenize(self, text: str) -> list[str]:
        return [t for t, _, _ in self.tokenize_with_spans(text)]

    # --- step 7: the model input
    def encode(self, text: str, pair: str | None = None, *, max_length: int = 512, truncate: bool = False,
               pad_to: int | None = None) -> Encoding:
        """[CLS] text [SEP] (pair [SEP]) with segment ids, mask and spans; optional truncation/padding."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}; pass the sentence itself")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"pair must be a str or None, got {type(pair).__name__}")
        a = self.tokenize_with_spans(text)
        b = self.tokenize_with_spans(pair) if pair is not None else None
        n_special = 2 if b is None else 3
        n = len(a) + n_special + (len(b) if b is not None else 0)
        truncated = 0
        if n > max_length:
            how = "to keep the first" if b is None else "to shorten the longer text first (longest_first) to fit"
            if not truncate:
                raise InputTooLongError(
                    f"the input is {n} tokens but the model takes at most {max_length} (including "
                    f"{'[CLS] and [SEP]' if b is None else '[CLS] and two [SEP]'}); shorten the text, or pass "
                    f"truncate=True {how} {max_length} tokens")
            if max_length < n_special:
                raise ValueError(f"max_length={max_length} leaves no room for the special tokens")
            keep_a, keep_b = _truncation_lengths(len(a), None if b is None else len(b), max_length - n_special)
            truncated = len(a) - keep_a + (len(b) - keep_b if b is not None else 0)
            a = a[:keep_a]
            b = b[:keep_b] if b is not None else None

        tokens, spans, segments = ["[CLS]"], [None], [0]
        for which, part in enumerate([a] if b is None else [a, b]):
            tokens += [t for t, _, _ in part] + ["[SEP]"]
            spans += [(which, s, e) for _, s, e in part] + [None]
            segments += [which] * (len(part) + 1)
        ids = [self.token_to_id(t) for t in tokens]
        enc = Encoding(tokens, ids, segments, [1] * len(ids), spans, len(ids), truncated)
        return enc if pad_to is None else pad_encoding(enc, pad_to, self.token_to_id("[PAD]"), "[PAD]",
                                                       max_length=max_length)


def _truncation_lengths(n_a: int, n_b: int | None, budget: int) -> tuple[int, int]:
    """How many pieces of each text to keep: `tokenizers`' longest_first rule.

    A single text keeps its first `budget` pieces.  For a pair, the shorter text is kept whole
    when the longer one can absorb the cut; otherwise both get half, the longer one the odd piece.
    """
    if n_b is None:
        return min(n_a, budget), 0
    if n_a + n_b <= budget:
        return n_a, n_b
    short, long_ = sorted((n_a, n_b))
    long_ = short if short > budget else max(short, budget - short)
    if short + long_ > budget:
        short = budget // 2
        long_ = short + budget % 2
    return (short, long_) if n_a <= n_b else (long_, short)


def is_nonspacing_mark(ch: str) -> bool:
    """Unicode category Mn: the accents that strip_accents removes."""
    return OVERRIDES["mark"].get(ch, unicodedata.category(ch) == "Mn")


def _strip_accents(chars: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """NFD, then drop non-spacing marks, keeping each output character's source index.

    NFD reorders combining marks only within a run that starts at a character whose
    decomposition begins with a starter, so each run is normalised on its own; when the run
    was reordered, every output character takes the run's first source index.
    """
    out, known = [], OVERRIDES["strip"]  # characters whose decomposition `tokenizers` knows better
    if all(ch.isascii() and ch not in known for ch, _ in chars):
        return chars  # ASCII has no accents: NFD leaves it as it is (most text; 0.45 ms a sentence saved)
    for run in _nfd_runs(chars):
        nfd = unicodedata.normalize("NFD", "".join(ch for ch, _ in run))
        per_char = [(d, i) for ch, i in run for d in unicodedata.normalize("NFD", ch)]
        if "".join(d for d, _ in per_char) != nfd:
            per_char = [(d, run[0][1]) for d in nfd]
        if any(ch in known for ch, _ in run):
            per_char = [(d, i) for ch, i in run for d in (known[ch] if ch in known else
                                                           unicodedata.normalize("NFD", ch))]
        out += [(d, i) for d, i in per_char if not is_nonspacing_mark(d)]
    return out


def _nfd_runs(chars):
    run = []
    for ch, i in chars:
        first = unicodedata.normalize("NFD", ch)[:1]
        if run and unicodedata.combining(first) == 0:
            yield run
            run = []
        run.append((ch, i))
    if run:
        yield run


def pad_encoding(enc: Encoding, n: int, pad_id: int, pad_token: str = "[PAD]", *,
                 max_length: int | None = None) -> Encoding:
    """The one place an input is padded (both tokenizers' pad_to, and every batch): `enc` with `pad_token`
    appended up to n tokens, masked (0), in segment 0, with no span; n is checked (check_pad_to)."""
    extra = check_pad_to(n, len(enc.ids), max_length) - len(enc.ids)
    if not extra:
        return enc
    return Encoding(enc.tokens + [pad_token] * extra, enc.ids + [pad_id] * extra, enc.segments + [0] * extra,
                    enc.mask + [0] * extra, enc.spans + [None] * extra, enc.n_real, enc.truncated)


def check_pad_to(pad_to, n_real: int, max_length: int | None = None) -> int:
    """pad_to as an int, checked: within the model's positions (max_length, when given) and not shorter
    than the input's tokens."""
    pad_to = as_int(pad_to, "pad_to")
    if max_length is not None and pad_to > max_length:
        raise InputTooLongError(f"pad_to={pad_to} is more than the model's {max_length} positions")
    if pad_to < n_real:
        raise ValueError(f"pad_to={pad_to} is shorter than the input's {n_real} tokens; padding never "
                         f"cuts tokens (use pad_to>={n_real}, or truncate=True with a shorter text)")
    return pad_to
