"""What comes from other libraries: their tensors as NumPy, their tokens as text people read.

    from bertviz_lite.foreign import host_numpy, prettify_tokens
    host_numpy(outputs.attentions[0], "attentions[0]")   # a torch tensor that tracks gradients, on any device
    prettify_tokens(["[CLS]", "Ġthe", "▁cat", "##s"])    # ['[CLS]', 'the', 'cat', 's']

`host_numpy` duck-types the frameworks instead of importing them: `.detach()` (torch: drop the
gradient graph), `.cpu()` / `.get()` (move to the host), `.numpy()` (torch, TensorFlow), then
`__array__` (JAX, NumPy-like). `prettify_tokens` is bertviz's `prettify_tokens` rule, shared by the
views, `fill_mask`'s strings and the CLI: the byte-level BPE space mark Ġ (RoBERTa, GPT-2) and
SentencePiece's ▁ (ALBERT, T5), WordPiece's leading ## and BPE's </w> are dropped; special tokens
([CLS], <s>) stay as they are. The views label every token with its position ("3 s"), so a
piece stays apart from a word of the same spelling.
"""

from __future__ import annotations

from . import backend

BPE_SPACE = "\u0120"  # Ġ: byte-level BPE's "a space before this token"
BPE_NEWLINE = "\u010a"  # Ċ: byte-level BPE's newline
SP_SPACE = "\u2581"  # ▁: SentencePiece's "a space before this token"


def _special(text: str) -> bool:
    return text.startswith("[") and text.endswith("]") or text.startswith("<") and text.endswith(">")


def prettify_token(token: str) -> str:
    """One token as people read it: Ġ and ▁ (a space before the word) and </w> dropped, Ċ shown as ↵
    (bertviz's prettify_tokens); WordPiece's leading ## is kept, as bertviz keeps it: it tells a piece
    ("##s") from a word ("s"), which lesson 01 teaches (`join_tokens` writes the pieces as words).
    Special tokens ([CLS], <s>, <mask>) and tokens that would become empty stay as they are."""
    text = str(token)
    if _special(text):
        return text
    out = text.replace(BPE_SPACE, "").replace(SP_SPACE, "").replace(BPE_NEWLINE, "\u21b5").replace("</w>", "")
    return out if out.strip() else text


def join_tokens(tokens) -> str:
    """Tokens written back as text, for a title: a ## piece joins the word before it; with byte-level BPE
    or SentencePiece (some token carries Ġ or ▁) a token without the mark joins the word before it.
    ["[CLS]", "it", "pu", "##rred", "."] -> "[CLS] it purred ."."""
    tokens = [str(t) for t in tokens]
    marked = any(t.startswith((BPE_SPACE, SP_SPACE)) for t in tokens)
    words: list[str] = []
    for t in tokens:
        glued = words and not _special(t) and not _special(words[-1]) and (
            t.startswith("##") and len(t) > 2 or marked and not t.startswith((BPE_SPACE, SP_SPACE)))
        piece = t[2:] if t.startswith("##") and len(t) > 2 else prettify_token(t)
        if glued:
            words[-1] += piece
        else:
            words.append(piece)
    return " ".join(words)


def prettify_tokens(tokens) -> list[str]:
    """Each token as people read it (`prettify_token`): the default labels of every view."""
    if isinstance(tokens, (str, bytes)):
        raise TypeError("prettify_tokens takes a list of token strings, got one string")
    return [prettify_token(t) for t in tokens]


def host_numpy(value, what: str):
    """Any framework's tensor as a NumPy array on the host, without importing the framework.

    torch: `.detach()` (a tensor that tracks gradients refuses `__array__`), `.cpu()`, `.numpy()`
    (bfloat16, which NumPy lacks, through `.float()`); TensorFlow: `.numpy()`; CuPy: `.get()`; array_api_strict
    (the GPU stand-in's arrays too): `backend.to_host`;
    JAX and NumPy-like arrays: `__array__`. Anything else: TypeError naming `what` and the type."""
    if backend.is_host_array(value):
        return value
    if backend.is_strict_array(value):  # array_api_strict's, the GPU stand-in's too: read as the engine reads them
        return backend.to_host(value)
    v = value
    try:
        if callable(getattr(v, "detach", None)):
            v = v.detach()
        if callable(getattr(v, "cpu", None)):
            v = v.cpu()
        elif callable(getattr(v, "get", None)) and hasattr(v, "__cuda_array_interface__"):
            v = v.get()  # cupy
        if callable(getattr(v, "numpy", None)):
            try:
                v = v.numpy()
            except TypeError:  # torch bfloat16: NumPy has no such type
                if not callable(getattr(v, "float", None)):
                    raise
                v = v.float().numpy()
        return backend.host_asarray(v)
    except Exception as e:
        raise TypeError(f"{what}: could not read a {type(value).__module__}.{type(value).__name__} as numbers "
                        f"({type(e).__name__}: {e}); pass a NumPy array (torch: t.detach().cpu().numpy())") from None


def _index(value, name: str) -> int:
    """An integer argument (int or NumPy integer, never a bool, a float or a string), or TypeError."""
    if isinstance(value, backend.HOST_BOOLS) or not isinstance(value, backend.HOST_INTEGERS):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    return int(value)


def read_attentions(attentions, tokens, *, sentence_b_start=None, batch_index=None):
    """Check attention computed elsewhere (`Trace.from_attentions`'s arguments) and read it:
    (maps: L float32 arrays [heads, n, n], tokens: n strings, sentence_b_start: int or None).

    attentions: a sequence of L tensors [batch, heads, n, n] or [heads, n, n] of any framework
    (`host_numpy`), or one array [L, batch, heads, n, n] / [L, heads, n, n]; tokens: a list of n
    strings (one string is refused: it would become one token per character). batch_index: which
    example of a batch; None takes a batch of one and refuses a larger one (bertviz refuses it too)."""
    from .backend import host_bad_values, host_real_array
    from .errors import OutOfRangeError
    if tokens is None:
        raise TypeError("tokens is required: the n token strings the attention is over "
                        "(Hugging Face: tokenizer.convert_ids_to_tokens(inputs['input_ids'][0]))")
    if isinstance(tokens, (str, bytes)):
        raise TypeError(f"tokens must be a list of token strings, got one string {shorten(str(tokens))!r} "
                        "(split it into tokens first)")
    try:
        tokens = list(tokens)
    except TypeError:
        raise TypeError(f"tokens must be a list of token strings, got {type(tokens).__name__}") from None
    bad = [t for t in tokens if not isinstance(t, backend.HOST_STRINGS)]
    if bad:
        raise TypeError(f"tokens must be strings; tokens holds {type(bad[0]).__name__} {bad[0]!r}")
    tokens = [str(t) for t in tokens]
    n = len(tokens)
    if n == 0:
        raise ValueError("tokens is empty: pass the n token strings the attention is over")
    if batch_index is not None:
        batch_index = _index(batch_index, "batch_index")
    if sentence_b_start is not None:
        sentence_b_start = _index(sentence_b_start, "sentence_b_start")
        if not 0 < sentence_b_start < n:
            raise OutOfRangeError(f"sentence_b_start must be a token index 1..{n - 1}, got {sentence_b_start}")
    if backend.is_strict_array(attentions):  # one stacked array [L, ...]: array_api_strict's has no len()
        attentions = backend.to_host(attentions)
    if isinstance(attentions, (str, bytes, dict)) or not hasattr(attentions, "__len__"):
        raise TypeError("attentions must be a sequence of L arrays [batch, heads, n, n] "
                        f"(Hugging Face's outputs.attentions), got {type(attentions).__name__}")
    maps = []
    for layer, a in enumerate(attentions):
        what = f"attentions[{layer}]"
        a = host_real_array(host_numpy(a, what), f"{what} (NumPy, or a tensor of torch, TensorFlow, JAX, CuPy)")
        if a.ndim == 4:
            if batch_index is None and a.shape[0] != 1:  # a padded batch shown as its first example would mislead
                raise ValueError(f"{what} holds a batch of {a.shape[0]} examples (tokenizer(..., padding=True)?); "
                                 "the views draw one: pass one example's attention ([a[i:i + 1] for a in "
                                 "outputs.attentions]) with its tokens, or Trace.from_attentions(..., batch_index=i)")
            if batch_index is None:
                batch_index = 0
            if not 0 <= batch_index < a.shape[0]:
                raise OutOfRangeError(f"batch_index {batch_index} is out of range: {what} holds a batch of "
                                      f"{a.shape[0]}")
            a = a[batch_index]
        if a.ndim != 3 or a.shape[1:] != (n, n):
            raise ValueError(f"{what} has shape {tuple(a.shape)}; expected [batch, heads, n, n] "
                             f"or [heads, n, n] with n = {n} tokens")
        if host_bad_values(a):
            raise ValueError(f"{what} holds NaN or inf values")
        if maps and a.shape[0] != maps[0].shape[0]:
            raise ValueError(f"{what} has {a.shape[0]} heads, attentions[0] has {maps[0].shape[0]}")
        check_rows(a, what)
        maps.append(a)
    if not maps:
        # seen with transformers 5: from_pretrained(..., output_attentions=True), then outputs[-1], gave an
        # empty tuple; say how to ask for the maps and where to read them
        raise ValueError("attentions is empty: pass one array per layer. A Hugging Face model returns them when "
                         "called with output_attentions=True, or with model.config.output_attentions = True set "
                         "before the call; read them by name, outputs.attentions (outputs[-1] may be another "
                         "output, or an empty tuple). Still none: load the model with attn_implementation=\"eager\" "
                         "(fused attention kernels make no maps)")
    return maps, tokens, sentence_b_start


# dropout on attention weights (a model left in train mode) zeroes some weights and scales the rest by
# 1/(1-p): the rows stay non-negative and sum to 1 on average, which scores (negative, unbounded) never do
DROPOUT_MEAN_TOLERANCE = 0.1


def check_rows(a, what: str) -> None:
    """Attention weights: rows that are non-negative and sum to 1, or one error saying what was given
    instead (dropout's rows: call model.eval(); anything else: the scores before the softmax)."""
    sums = a.sum(axis=-1)
    if a.min() >= -1e-6 and abs(sums - 1).max() <= 1e-2:  # float16 and bfloat16 maps round to ~3e-3
        return
    if a.min() >= -1e-6 and abs(float(sums.mean()) - 1) <= DROPOUT_MEAN_TOLERANCE:
        raise ValueError(f"{what}'s rows do not sum to 1 (they run {sums.min():.3g}..{sums.max():.3g}, "
                         f"{sums.mean():.3g} on average, none negative): that is dropout, the model is in "
                         "training mode; call model.eval() before running it, then pass outputs.attentions again")
    raise ValueError(f"{what}'s rows do not sum to 1 (they run {sums.min():.3g}.."
                     f"{sums.max():.3g}): pass the attention weights after the softmax, not the scores")


def shorten(text: str, n: int = 40) -> str:
    """text cut to n characters, the last one an ellipsis."""
    return text if len(text) <= n else text[:n - 1] + "\u2026"
