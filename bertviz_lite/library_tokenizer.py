"""RoBERTa's byte-level BPE and ALBERT's SentencePiece (Unigram) tokenizers, run by Hugging Face's
`tokenizers` library from the checkpoint's tokenizer.json.

WordPiece stays hand-written (`bertviz_lite.tokenizer`): it is a lesson. These two are not, so the
library that defines them runs them, and this module only turns its output into the same
`Encoding` (tokens, ids, segments, mask, spans) the rest of bertviz-lite reads.
"""

from __future__ import annotations

from . import families
from .errors import BertVizError, InputTooLongError
from .tokenizer import Encoding, pad_encoding

# every family's padding token (families.py), the library tokenizers' first: roberta's and albert's <pad>
PAD_TOKENS = tuple(sorted(families.PAD_SPELLINGS, key=lambda t: t.startswith("[")))


class LibraryTokenizer:
    """A tokenizer.json tokenizer (BPE, Unigram) with the `encode` of WordPieceTokenizer."""

    def __init__(self, tokenizer, *, pad_token_id: int | None = None):
        self._tok = tokenizer
        self._tok.no_truncation()
        self._tok.no_padding()
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        if pad_token_id is None:
            pad_token_id = next((vocab[t] for t in PAD_TOKENS if t in vocab), None)
        if pad_token_id is None:
            raise BertVizError("the tokenizer has no padding token (<pad> or [PAD])")
        self.pad_token_id = pad_token_id
        self.model_type = type(tokenizer.model).__name__  # BPE, Unigram

    @classmethod
    def from_tokenizer_json(cls, path, **kw) -> "LibraryTokenizer":
        from tokenizers import Tokenizer
        return cls(Tokenizer.from_file(str(path)), **kw)

    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    def token_to_id(self, token: str) -> int:
        i = self._tok.token_to_id(token)
        if i is None:
            raise KeyError(f"{token!r} is not in the vocabulary")
        return i

    def id_to_token(self, i: int) -> str:
        t = self._tok.id_to_token(int(i))
        if t is None:
            raise IndexError(f"token id {i} is outside the vocabulary 0..{self.vocab_size - 1}")
        return t

    def tokenize(self, text: str) -> list[str]:
        return self._tok.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str, pair: str | None = None, *, max_length: int = 512, truncate: bool = False,
               pad_to: int | None = None) -> Encoding:
        """The library's encoding (its special tokens and type ids) as an Encoding, truncated and padded
        as WordPieceTokenizer.encode does."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}; pass the sentence itself")
        if pair is not None and not isinstance(pair, str):
            raise TypeError(f"pair must be a str or None, got {type(pair).__name__}")
        enc = self._tok.encode(text, pair)
        full, truncated = len(enc.ids), 0
        if full > max_length:
            if not truncate:
                raise InputTooLongError(f"the input is {full} tokens but the model takes at most {max_length} "
                                        "(special tokens included); shorten the text or pass truncate=True")
            self._tok.enable_truncation(max_length, strategy="longest_first")
            try:
                enc = self._tok.encode(text, pair)
            finally:
                self._tok.no_truncation()
            truncated = full - len(enc.ids)
        tokens, ids, segments = list(enc.tokens), list(enc.ids), list(enc.type_ids)
        spans = [None if s is None or special else (s, a, b)
                 for s, special, (a, b) in zip(enc.sequence_ids, enc.special_tokens_mask, enc.offsets)]
        enc = Encoding(tokens, ids, segments, [1] * len(ids), spans, len(ids), truncated)
        return enc if pad_to is None else pad_encoding(enc, pad_to, self.pad_token_id,
                                                       self.id_to_token(self.pad_token_id), max_length=max_length)
