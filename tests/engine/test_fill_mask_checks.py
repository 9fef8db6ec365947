"""fill_mask on a vocabulary without a mask token, and with more predictions than the memory budget holds."""

from __future__ import annotations

import pytest

import bertviz_lite as bv
from bertviz_lite.errors import BertVizError, TraceTooLargeError
from bertviz_lite.tokenizer import WordPieceTokenizer

SMALL = {"hidden_size": 32, "num_layers": 1, "num_heads": 2, "ffn_size": 64}


def model_with_vocab(vocab):
    m = bv.load("random", config={**SMALL, "vocab_size": len(vocab)}, mlm=True)
    m.tokenizer = WordPieceTokenizer(vocab)
    return m


def test_no_mask_token_in_the_vocabulary_says_so():
    # the message once said "no [MASK] token in the text; write [MASK]" while the text had one, and the
    # typed [MASK] had become [UNK]s
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat"]
    m = model_with_vocab(vocab)
    with pytest.raises(ValueError, match=r"\[MASK\], a special token this vocabulary does not have"):
        m.tokenize("the [MASK] sat")  # a word, not [UNK] [UNK] [UNK] in silence
    with pytest.raises(BertVizError, match="no mask token"):
        m.fill_mask("the [MASK] sat")


def test_a_vocabulary_with_the_mask_token_still_predicts():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat"]
    m = model_with_vocab(vocab)
    (preds,) = m.fill_mask("the [MASK] sat", top_k=2)
    assert len(preds) == 2 and preds[0].position == 2
    with pytest.raises(ValueError, match=r"no \[MASK\] token"):
        m.fill_mask("the cat sat")


def test_many_masks_times_a_large_top_k_is_refused_with_an_estimate():
    # 500 masks x top_k = 30,522 was once accepted and built 15 million predictions (2.9 GB)
    m = bv.load("random", config=SMALL, mlm=True)
    with pytest.raises(TraceTooLargeError, match="over the budget of 0 MiB"):
        m.fill_mask("the [MASK] sat", top_k=5, max_bytes=100)
    with pytest.raises(TraceTooLargeError, match=r"500 masks x top_k 30,522 = 15,261,000 predictions, about 2,911 MiB"):
        m.fill_mask("[MASK] " * 500, top_k=30_522)
    (preds,) = m.fill_mask("the [MASK] sat", top_k=30_522)  # one mask, the whole vocabulary: 6 MiB
    assert len(preds) == 30_522
