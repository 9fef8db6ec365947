"""Train MiniLM's last k encoder layers together with the masked-LM head, in NumPy with gradients written
by hand, and write the file `load("minilm-mlm")` ships.

    .venv/bin/python training/train_minilm_mlm.py            # train, write bertviz_lite/data/minilm_mlm.*
    .venv/bin/python training/train_minilm_mlm.py --check    # train again, exit 1 unless the bytes are the same
    .venv/bin/python training/train_minilm_mlm.py --layers 2 --sentences 4000 --out /tmp/m/minilm_mlm.safetensors
    .venv/bin/python training/train_minilm_mlm.py --smoke    # 6 steps on 64 sentences (tests/training/test_train_minilm_mlm.py)
    .venv/bin/python training/train_minilm_mlm.py --report   # the JSON's numbers as markdown, train nothing
    .venv/bin/python training/train_minilm_mlm.py --evaluate # the file at --out and the frozen head: top-1, top-5
                                                            # and echo rate on both cloze sets and the held-out split

What it does (every choice and its reason is in training/JOURNAL.md, "minilm-mlm"):
1. the corpus, sample and held-out split of training/train_mlm_head.py (WordNet's definitions and examples,
   at most MAX_TOKENS pieces, a seeded 5% held out, never trained on);
   and WordNet's other usage examples as more training text (--text wordnet+usage, the default), every
   training line ended with a period as prompts end (--end-period, the default; --no-end-period);
2. BERT's masking (mlm.choose_masks), DRAWS draws per training sentence, one per held-out sentence, seeded;
   the training draws by pieces or whole words (--masking) at RATES (--rates); the held-out draws are always
   BERT's, so every run is scored on the same rows;
3. the frozen lower L-k layers run once per (sentence, draw) on the masked text: their output is the input
   Z of the first trained layer (engine.embeddings and engine.encoder_layer, nothing recorded); cached
   in a private folder (mode 0700, yours, no links), one file per key of everything that determines it,
   written atomically and checked before use;
4. batches of BATCH masked sentences of similar length (little padding); each step runs the last k layers
   and the head forward through the recorder (the tape), takes the logits only at the chosen rows, and
   runs bertviz_lite.backward in reverse (mlm.loss_and_grads); Adam with BERT's warm-up over 5% of the
   steps and linear decay, the layers at LR_LAYERS and the head at LR_HEAD; the layers start from the
   published MiniLM, the head from the one load("minilm") ships (training/train_mlm_head.py);
5. held-out numbers by word class beside the frozen head (the shipped head on the published encoder) and
   the unigram guess, with the echo rate; both cloze sets (training/corpus/cloze_sentences.tsv, data/cloze_everyday.tsv);
   example predictions; the cost of float16 storage;
6. the k adapted layers and the head as safetensors (float16) and a JSON beside it, replaced as a pair
   (private_files.write_pair: both written whole first, the JSON renamed last; a run stopped between the
   renames leaves a pair that loads); nothing is written after a non-finite loss or weight.

Determinism: BLAS and the engine's kernels run on THREADS threads (threadpoolctl, BERTVIZ_LITE_THREADS), so
the same machine, library versions and thread count give the same bytes (--check). Another CPU or BLAS
may round the float32 products differently.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
import make_corpus as MC  # noqa: E402  (WordNet's files: the usage examples, the definitions' headwords)
import train_mlm_head as T  # noqa: E402  (corpus, sample, split, summaries: shared with the head-only fit)
import weights_files as WF  # noqa: E402  (the writer of what the package reads)
from private_files import (CACHE, UnsafePath, cache_problem, cached_arrays, check_free_space,  # noqa: E402
                           model_sha256, output_problem, path_argument, read_regular, read_run_json,
                           refusals_as_lines, regular_or_absent, whole_number, write_pair)

import bertviz_lite as bv  # noqa: E402
from bertviz_lite import loading, mlm, schema  # noqa: E402

OUT = ROOT / "bertviz_lite" / "data" / loading.MINILM_MLM_FILE
THREADS = 1  # one BLAS thread: on this shared 2-core machine two ran the products up to 10x slower (training/JOURNAL.md)
CLOZE = ROOT / "training" / "corpus" / "cloze_sentences.tsv"
EVERYDAY = ROOT / "data" / "cloze_everyday.tsv"  # the fresh everyday set: answer and accepted alternatives
USAGE = ROOT / "training" / "corpus" / "wordnet_usage.txt.gz"  # every WordNet usage example of >= USAGE_WORDS words (--make-usage)
USAGE_WORDS = 4
SMOKE_LOG = ROOT / "tests" / "fixtures" / "mlm" / "train_smoke_log.json"
LAYERS = 6  # k: the last k layers are trained, here all six (training/JOURNAL.md says why)
SENTENCES = None  # the whole corpus (124,171 sentences of at most MAX_TOKENS pieces, 5% held out): training/JOURNAL.md
DRAWS = 1  # masking draws per training sentence (the second epoch shows each draw again, in a new order)
MASKING = "pieces"  # training draws: "pieces" (BERT's original) or "words" (whole-word masking); held-out: pieces
RATES = (1.0, 0.0)  # of the chosen pieces of a training draw: -> [MASK], -> a random piece (the rest kept)
TEXT = "wordnet+usage"  # "wordnet": definitions + examples (T.corpus); "wordnet+usage": + every usage example (USAGE)
HEADWORDS = "none"  # a training definition is WordNet's definition alone ("a cleaning implement for sweeping")
END_PERIOD = True  # end every training line with "." (WordNet's lines rarely do; prompts do): training/JOURNAL.md
ENDINGS = (".", "!", "?")  # a line that ends with one of these is left as it is
EPOCHS = 2
BATCH = 128  # masked sentences per Adam step
LR_LAYERS, LR_HEAD = 5e-4, 1e-3  # the probe's (training/probe_mlm_adaptation.py)
FORWARD_BATCH = 256  # sentences per frozen forward
LOG_EVERY = 25
# the committed smoke log's settings, whatever the defaults
SMOKE = {"sentences": 64, "layers": 2, "draws": 1, "epochs": 1, "batch": 8, "steps": 6, "masking": "pieces",
         "rates": (0.8, 0.1), "text": "wordnet", "end_period": False, "headwords": "none"}
EXAMPLES = T.EXAMPLES_TO_SHOW + ("The doctor gave the patient some [MASK].", "A [MASK] is a large animal with a trunk.")


# ------------------------------------------------------------------------------------------
# arguments: every one checked before any work
# ------------------------------------------------------------------------------------------


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a learning rate, got {text!r}") from None
    if not (math.isfinite(v) and 0 < v < 1):
        raise argparse.ArgumentTypeError(f"a learning rate must be > 0 and < 1, got {text}")
    return v


MLM_V, MLM_H, MLM_FFN, MLM_HEADS = 30_522, 384, 1_536, 12  # all-MiniLM-L6-v2 (checked against the config in run)


def step_bytes(batch: int, layers: int, n: int = T.MAX_TOKENS) -> int:
    """About how many bytes one training step holds at its peak, for `batch` sentences of n pieces: per
    layer and token the tape's float32 lines (q, k, v, context, output, two LayerNorms and their inputs:
    ~12 H; the FFN's two 4H lines) and the attention scores and weights (2 x heads x n), twice (the backward's
    gradients beside them); the chosen rows' logits, log-probabilities, probabilities, one-hot and gradient
    (5 x rows x V)."""
    tokens, rows = batch * n, batch * math.ceil(mlm.MASK_RATE * n)
    per_token_layer = 4 * (12 * MLM_H + 2 * MLM_FFN + 2 * MLM_HEADS * n)
    return 2 * tokens * layers * per_token_layer + 5 * 4 * rows * MLM_V


def available_memory() -> int:
    """MemAvailable from /proc/meminfo (bytes); the physical memory where that cannot be read."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/meminfo", encoding="ascii") as f:
            line = next(ln for ln in f if ln.startswith("MemAvailable:"))
        return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _rates(text: str) -> tuple[float, float]:
    parts = text.split("/")
    try:
        pm, pr, pk = (int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected three whole percentages MASK/RANDOM/KEEP, e.g. 80/10/10, "
                                         f"got {text!r}") from None
    if min(pm, pr, pk) < 0 or pm + pr + pk != 100:
        raise argparse.ArgumentTypeError(f"the three percentages must be >= 0 and add up to 100, got {text!r}")
    return pm / 100, pr / 100


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=whole_number(1, 6), default=LAYERS, help="k, how many last layers to train (1..6)")
    ap.add_argument("--sentences", type=whole_number(40), default=SENTENCES,
                    help="sentences sampled (default: all of them; 5%% held out)")
    ap.add_argument("--train-sentences", type=whole_number(1), default=None,
                    help="train on only the first N training sentences of the split (the held-out ones stay all): "
                         "a short probe measured on the same held-out rows as a full run")
    ap.add_argument("--init", type=path_argument, default=None,
                    help="start the trained layers and the head from this minilm-mlm file (e.g. the shipped one: "
                         "longer training) instead of the published layers and the k = 0 head")
    ap.add_argument("--mask-seed", type=whole_number(0), default=None,
                    help="draw the training sentences' masks from their own seeded stream (a run that continues "
                         "another with --init sees fresh masks); the held-out draws stay the same")
    ap.add_argument("--draws", type=whole_number(1, 20), default=DRAWS, help="masking draws per training sentence")
    ap.add_argument("--epochs", type=whole_number(1, 50), default=EPOCHS)
    ap.add_argument("--masking", choices=("pieces", "words"), default=MASKING,
                    help="training draws: pieces one by one (BERT) or whole words; held-out draws are always pieces")
    ap.add_argument("--rates", type=_rates, default=RATES, metavar="MASK/RANDOM/KEEP",
                    help="of the chosen pieces of a training draw, percent to [MASK], to a random piece, kept "
                         "(default 100/0/0: training/JOURNAL.md says why; BERT used 80/10/10)")
    ap.add_argument("--text", choices=("wordnet", "wordnet+usage"), default=TEXT,
                    help="training text: WordNet's definitions and examples, or those plus every usage example "
                         f"of >= {USAGE_WORDS} words ({USAGE.relative_to(ROOT)}); the held-out split is the same")
    ap.add_argument("--headwords", choices=("none", "first", "all"), default=HEADWORDS,
                    help="write every training definition after the word it defines, as a dictionary does "
                         "(first: 'broom: a cleaning implement for sweeping'), or after every word of its synset "
                         "(all: 'post office, local post office: a local branch where ...'); WordNet's "
                         "definitions alone never show the word; the held-out split stays as it is")
    ap.add_argument("--end-period", action=argparse.BooleanOptionalAction, default=END_PERIOD,
                    help="end every training line that lacks one with a period, as a cloze prompt ends (of "
                         "WordNet's lines almost none do, and most that do end with 'etc.'); the held-out split "
                         "stays as it is")
    ap.add_argument("--batch", type=whole_number(1, 4096), default=BATCH, help="masked sentences per step")
    ap.add_argument("--lr-layers", type=_rate, default=LR_LAYERS)
    ap.add_argument("--lr-head", type=_rate, default=LR_HEAD)
    ap.add_argument("--steps", type=whole_number(1), default=None,
                    help="stop after this many steps (a short measurement)")
    ap.add_argument("--heldout-every", type=whole_number(0), default=16 * LOG_EVERY,
                    help="the held-out loss every this many steps, at the first and at the last (0: none; each "
                         "costs a forward over the held-out split)")
    ap.add_argument("--seed", type=whole_number(0), default=T.SEED)
    ap.add_argument("--threads", type=whole_number(1, 64), default=THREADS,
                    help="BLAS and kernel threads (fixed: --check)")
    ap.add_argument("--out", type=path_argument, default=OUT,
                    help="the .safetensors file to write (a .json goes beside it)")
    ap.add_argument("--cache", type=path_argument, default=CACHE,
                    help="a private folder (mode 0700, yours, not a link) for the frozen layers' output; made if "
                         "missing (default: %(default)s)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--check", action="store_true", help="train again and compare with the file at --out")
    what.add_argument("--smoke", action="store_true", help="a few steps on a tiny subset, checked against "
                      f"{SMOKE_LOG.relative_to(ROOT)} (--smoke --write-log rewrites it)")
    what.add_argument("--report", action="store_true", help="print the JSON's numbers as markdown, train nothing")
    what.add_argument("--evaluate", action="store_true", help="score the model at --out (and MiniLM's frozen head) "
                      "on the cloze sets and the held-out split: top-1, top-5, echo rate; train nothing")
    what.add_argument("--make-usage", action="store_true", help=f"write {USAGE.relative_to(ROOT)} from WordNet's "
                      "data files in /usr/share/wordnet (Debian's wordnet-base), train nothing")
    ap.add_argument("--write-log", action="store_true", help="with --smoke: rewrite the committed smoke log")
    args = ap.parse_args(argv)
    if args.write_log and not args.smoke:
        ap.error("--write-log goes with --smoke")
    reads = "--check" if args.check else "--report" if args.report else "--evaluate" if args.evaluate else None
    problem = None if args.smoke or args.make_usage else output_problem(args.out, reads)
    if problem:  # an --out folder it cannot write is refused here, not after the whole run
        ap.error(problem)
    if args.init is not None:
        for path in (args.init, args.init.with_suffix(".json")):  # no link, FIFO or folder read through
            try:
                regular_or_absent(path)
            except UnsafePath as e:
                ap.error(str(e))
        if not args.init.is_file():
            ap.error(f"--init needs a minilm-mlm file; {args.init} does not exist")
    if not (args.report or args.make_usage or args.evaluate):  # before tokenizing, not after
        problem = cache_problem(args.cache)
        if problem:
            ap.error(problem)
    if args.smoke:
        for k, v in SMOKE.items():
            setattr(args, k, v)
    if not (reads or args.smoke or args.make_usage):
        need = step_bytes(args.batch, args.layers)
        if need > available_memory():
            ap.error(f"--batch {args.batch} --layers {args.layers}: a training step needs about "
                     f"{need / 2**30:.1f} GiB (the tape of {args.layers} layers over {args.batch} sentences of up "
                     f"to {T.MAX_TOKENS} pieces, and the {MLM_V:,}-wide logits at the chosen rows), and "
                     f"{available_memory() / 2**30:.1f} GiB is available: lower --batch or --layers")
    return args


# ------------------------------------------------------------------------------------------
# data: masked draws, the frozen lower layers once per draw, batches by length
# ------------------------------------------------------------------------------------------


def masked_draws(model, encs, n_held: int, draws: int, rng, masking: str = MASKING, rates=RATES, train_rng=None):
    """[(sentence index, Masked)]: one draw per held-out sentence (the first n_held; always BERT's piece
    masking at 80/10/10, so the held-out rows stay those of earlier runs), `draws` per training one
    (`masking`: "pieces" or "words", at `rates` (to [MASK], to a random piece)), from `train_rng` if given
    (fresh masks for a run that continues another), else from the same stream as the held-out ones."""
    tok = model.tokenizer
    special = {tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")}
    common = {"vocab_size": model.config.vocab_size, "mask_id": tok.token_to_id("[MASK]"), "special_ids": special}
    out = []
    for d in range(draws):
        for i, e in enumerate(encs):
            if i < n_held:
                if d == 0:
                    out.append((i, mlm.choose_masks(e.ids, rng, **common)))
                continue
            words = mlm.word_ids(e.tokens) if masking == "words" else None
            out.append((i, mlm.choose_masks(e.ids, rng if train_rng is None else train_rng, p_mask=rates[0],
                                            p_random=rates[1], words=words, **common)))
    return out


def takes_period(last_piece: str, n: int) -> bool:
    """The one rule of --end-period: a line gets "." unless it already ends with . ! or ?, or one more piece
    would pass MAX_TOKENS (n: its pieces with [CLS] and [SEP])."""
    return last_piece not in ENDINGS and n < T.MAX_TOKENS


def before_sep(seq: list, item) -> list:
    """seq with item put just before its last entry ([SEP])."""
    return seq[:-1] + [item] + seq[-1:]


def end_with_period(model, e):
    """The encoding of the same text with "." after it: WordPiece always makes "." a piece of its own, so it is
    inserted before [SEP] (no span: the writer did not write it); unchanged unless takes_period."""
    if not takes_period(e.tokens[-2], len(e.ids)):
        return e
    return replace(e, tokens=before_sep(e.tokens, "."), ids=before_sep(e.ids, model.tokenizer.token_to_id(".")),
                   segments=before_sep(e.segments, e.segments[-2]), mask=before_sep(e.mask, 1),
                   spans=before_sep(e.spans, None), n_real=e.n_real + 1)


def period_draw(model, m):
    """A masked draw with "." put before [SEP] as end_with_period puts it (never chosen: the same rows and
    targets); the rule is read on the line as written (a chosen last piece counts by its target)."""
    last = m.targets[m.positions.index(len(m.ids) - 2)] if len(m.ids) - 2 in m.positions else m.ids[-2]
    if not takes_period(model.tokenizer.id_to_token(last), len(m.ids)):
        return m
    return replace(m, ids=before_sep(m.ids, model.tokenizer.token_to_id(".")))


def with_headword(model, corpus: list[str], i: int, e, which: str = "first"):
    """Corpus line i, a WordNet definition, written after the word it defines ('broom: a cleaning implement
    for sweeping') or after every word of its synset (which="all"), tokenized; an example sentence, or a line
    that would pass MAX_TOKENS pieces, stays e."""
    heads = _headwords()
    if i >= len(heads):
        return e
    words = heads[i] if which == "all" else heads[i].split(", ")[0]
    h = model.tokenize(f"{words}: {corpus[i]}")
    return h if len(h.ids) <= T.MAX_TOKENS else e


@functools.cache
def _headwords() -> list[str]:
    return MC.read_headwords()


def usage_sentences() -> list[str]:
    """Every WordNet usage example of >= USAGE_WORDS words, as committed (--make-usage writes it)."""
    return MC.read_lines(USAGE)


def make_usage(wordnet: Path = Path("/usr/share/wordnet"), out: Path = USAGE) -> int:
    """training/corpus/wordnet_usage.txt.gz: every distinct quoted usage example of WordNet 3.0's glosses with at least
    USAGE_WORDS words, in file order (make_corpus keeps only those that start with a capital and have >= 5)."""
    if not (wordnet / "data.noun").exists():
        print(f"no WordNet data files in {wordnet}: apt-get install -y wordnet-base", file=sys.stderr)
        return 2
    examples, seen = [], set()
    for name in MC.FILES:
        for gloss in MC.glosses(wordnet / name):
            for ex in MC.EXAMPLE.findall(gloss):
                ex = " ".join(ex.split())
                if len(ex.split()) >= USAGE_WORDS and ex not in seen:
                    seen.add(ex)
                    examples.append(ex)
    MC.write_lines(out, examples)
    print(f"wrote {out} ({len(examples):,} usage examples)")
    return 0


def training_text(model, sentences, rng) -> list:
    """The usage examples that are not already in the corpus, tokenized (at most MAX_TOKENS pieces): extra
    training sentences, after the corpus's (never held out). sentences: the corpus sample's size (None: all),
    so a sample takes the same share of them as of the corpus."""
    corpus = T.corpus()
    known = set(corpus)
    fresh = [u for u in usage_sentences() if u not in known]
    return T.encode(model, fresh, None if sentences is None else round(sentences * len(fresh) / len(corpus)), rng)


def features(model, draws, first: int, progress: bool = True) -> list:
    """Z [n_i, H] (float32) of the first trained layer's input for every masked draw, in order."""
    lengths = np.array([len(m.ids) for _, m in draws])
    order = np.argsort(lengths, kind="stable")
    out = [None] * len(draws)
    t0 = time.perf_counter()
    for s in range(0, len(order), FORWARD_BATCH):
        idx = order[s:s + FORWARD_BATCH]
        n = int(lengths[idx].max())
        ids = np.zeros((len(idx), n), dtype=np.int64)
        mask = np.zeros((len(idx), n), dtype=np.int64)
        for j, i in enumerate(idx):
            ids[j, :lengths[i]] = draws[i][1].ids
            mask[j, :lengths[i]] = 1
        Z = mlm.frozen_layers(model, ids, mask, first)
        for j, i in enumerate(idx):
            out[int(i)] = np.ascontiguousarray(Z[j, :lengths[i]], dtype=np.float32)
        if progress and (s // FORWARD_BATCH) % 40 == 0:
            print(f"  frozen layers 0..{first - 1}: {s + len(idx):,} / {len(order):,} draws, "
                  f"{time.perf_counter() - t0:.0f} s", flush=True)
    return out


# ------------------------------------------------------------------------------------------
# the feature cache (training/private_files.py: private, checked before use, written whole)
# ------------------------------------------------------------------------------------------


def features_key(draws, first: int, seed: int, source: str, weights: str) -> str:
    """The sha256 of everything that determines the features: the seed, the layer, the model (its name and the
    sha256 of its weights, so an encoder with one weight changed gets its own features) and every input id."""
    return hashlib.sha256(json.dumps([seed, first, source, weights, [m.ids for _, m in draws]]).encode()).hexdigest()


def cached_features(model, draws, first: int, seed: int, cache: Path, progress: bool = True) -> list:
    """features(), cached in the private folder `cache` (private_files.cached_arrays) as the rows of every draw
    end to end and their offsets; a cached file is used only if its offsets match the draws' lengths and Z is
    float32 [rows, H] (and everything cached_arrays checks); otherwise the features are made afresh."""
    lengths = [len(m.ids) for _, m in draws]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)

    def make() -> dict:
        return {"offsets": offsets, "Z": np.concatenate(features(model, draws, first, progress))}

    def problem(f: dict):
        if f["offsets"].dtype != np.int64 or not np.array_equal(f["offsets"], offsets):
            return "its offsets do not match the sentences' lengths"
        want = (int(offsets[-1]), model.config.hidden_size)
        if f["Z"].dtype != np.float32 or f["Z"].shape != want:
            return f"Z is {f['Z'].dtype} {f['Z'].shape}, expected float32 {want}"
        return None

    key = features_key(draws, first, seed, model.source, model_sha256(model))
    f = cached_arrays(cache, "layer-input", key, ("offsets", "Z"), make, problem, say=lambda s: print(s, flush=True))
    return _slices(f["Z"], f["offsets"])


def _slices(Z, offsets) -> list:
    return [Z[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]


def build_batches(draws, Z, which, size: int, first: int) -> list:
    """mlm.batches_by_length over the draws numbered in `which`."""
    return mlm.batches_by_length([draws[i][1] for i in which], [Z[i] for i in which], size, first)


# ------------------------------------------------------------------------------------------
# evaluation
# ------------------------------------------------------------------------------------------


def heldout_groups(model, draws, held) -> tuple[dict, np.ndarray]:
    """Boolean row masks by word class and by what the encoder saw, in the order build_batches gives the rows."""
    tok, kind_code = model.tokenizer, {"mask": 0, "random": 1, "keep": 2}
    ordered = sorted(held, key=lambda i: (len(draws[i][1].ids), i))
    targets = np.array([t for i in ordered for t in draws[i][1].targets])
    kinds = np.array([kind_code[k] for i in ordered for k in draws[i][1].kinds])
    words = np.array([mlm.word_class(tok.id_to_token(int(t))) for t in targets])
    groups = {"content": words == "content", "function": words == "function", "other": words == "other",
              "[MASK]": kinds == 0, "content [MASK]": (words == "content") & (kinds == 0),
              "function [MASK]": (words == "function") & (kinds == 0), "random": kinds == 1, "kept": kinds == 2}
    return groups, targets


def read_cloze(path: Path = CLOZE) -> list[tuple[str, list[str]]]:
    """(sentence, accepted answers): the intended answer first, then the alternatives (comma-separated)."""
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
    return [(s, a.split(",")) for s, a in (ln.split("\t") for ln in lines)]


def predict(model, sentences, top_k: int = 5) -> dict:
    return {s: [p.token for p in model.fill_mask(s, top_k=top_k)[0]] for s in sentences}


def sentence_words(sentence: str) -> set:
    """The words a sentence shows, lower-cased, [MASK] left out."""
    return set(re.findall(r"[a-z]+", sentence.lower().replace("[mask]", " ")))


def is_echo(guess: str, accepted, words) -> bool:
    """A wrong guess that repeats a word the sentence already shows ("We eat soup with a [MASK]." -> soup)."""
    return guess not in accepted and guess in words


def cloze_score(model, path: Path = CLOZE) -> dict:
    """Top-1 and top-5 (any accepted answer) and the echo rate (the top-1 guess is wrong and a word of the
    sentence) on a cloze file."""
    items = read_cloze(path)
    top = predict(model, [s for s, _ in items])
    top1 = [top[s][0] in ok for s, ok in items]
    top5 = [any(a in top[s] for a in ok) for s, ok in items]
    echo = [is_echo(top[s][0], ok, sentence_words(s)) for s, ok in items]
    n = len(items)
    return {"file": path.name, "sentences": n, "top1_hits": int(sum(top1)), "top1": sum(top1) / n,
            "top5_hits": int(sum(top5)), "top5": sum(top5) / n, "echoes": int(sum(echo)), "echo": sum(echo) / n,
            "per_sentence": [[s, ok, top[s]] for s, ok in items]}


def cloze_scores(model) -> dict:
    return {"cloze_sentences": cloze_score(model, CLOZE), "everyday": cloze_score(model, EVERYDAY)}


def heldout_others(model, encs, draws, held) -> list:
    """Per held-out row (in heldout_groups' order), the whole-word pieces the sentence shows elsewhere:
    a wrong top-1 among them is an echo."""
    tok = model.tokenizer
    words = [tok.id_to_token(i) for i in range(model.config.vocab_size)]
    out = []
    for i in sorted(held, key=lambda i: (len(draws[i][1].ids), i)):
        ids = encs[draws[i][0]].ids
        for p in draws[i][1].positions:
            out.append({t for q, t in enumerate(ids) if q != p and words[t].isalpha()})
    return out


def heldout_scores(params, frozen, batches, c, groups, targets, others) -> dict:
    """T.summarise's top-1 / top-5 / loss per group, and the echo rate: the top-1 is wrong and a piece the
    sentence shows elsewhere."""
    ranks, losses, best = mlm.ranks_and_losses(params, frozen, batches, c, np, top1=True)
    out = T.summarise(ranks, losses, groups)
    echo = np.array([b != t and b in o for b, t, o in zip(best.tolist(), targets.tolist(), others)])
    for name, sel in {"all": np.ones(len(echo), bool), **groups}.items():
        out[name]["echo"] = float(np.mean(echo[sel])) if sel.any() else None
    return out


def finite(params: dict) -> bool:
    return all(bool(np.isfinite(v).all()) for v in params.values())


# ------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.report:
        return refusals_as_lines(lambda: print(read_run_json(args.out.with_suffix(".json"), report)) or 0)
    if args.make_usage:
        return make_usage()
    before = os.environ.get("BERTVIZ_LITE_THREADS")
    os.environ["BERTVIZ_LITE_THREADS"] = str(args.threads)  # the engine's kernels; threadpoolctl fixes BLAS's
    try:
        with threadpool_limits(limits=args.threads, user_api="blas"):
            return refusals_as_lines(lambda: evaluate(args) if args.evaluate else run(args))
    finally:
        if before is None:
            del os.environ["BERTVIZ_LITE_THREADS"]
        else:
            os.environ["BERTVIZ_LITE_THREADS"] = before


def prepare(args, published):
    """The sentences (held-out first, then the corpus's training ones, then any extra text) and their draws."""
    corpus = T.corpus()
    picked = T.sample(published, corpus, args.sentences, np.random.default_rng(args.seed))
    encs = [e for _, e in picked]
    n_held = int(round(T.HELDOUT * len(encs)))
    if args.headwords != "none":  # training lines only, like the period below
        encs = encs[:n_held] + [with_headword(published, corpus, i, e, args.headwords)
                                for i, e in picked[n_held:]]
    if args.train_sentences is not None:
        encs = encs[:n_held + args.train_sentences]
    n_corpus = len(encs)
    if args.text == "wordnet+usage":
        share = args.sentences if args.train_sentences is None else args.train_sentences
        encs = encs + training_text(published, share, np.random.default_rng([args.seed, 4]))
    if args.end_period:  # training lines only: the held-out ones (the first n_held) are scored as they were
        encs = encs[:n_held] + [end_with_period(published, e) for e in encs[n_held:]]
    draws = masked_draws(published, encs, n_held, args.draws, np.random.default_rng([args.seed, 1]),
                         args.masking, args.rates,
                         None if args.mask_seed is None else np.random.default_rng([args.seed, 1, args.mask_seed]))
    held = [j for j, (i, _) in enumerate(draws) if i < n_held]
    train = [j for j, (i, _) in enumerate(draws) if i >= n_held]
    return encs, n_held, n_corpus, draws, held, train


def evaluate(args) -> int:
    """--evaluate: the model at --out and MiniLM's frozen head on the cloze sets and the held-out split, the
    split as it is and with each line ended by a period (the same chosen rows: how a prompt ends)."""
    published = bv.load("minilm", backend="numpy")
    c = published.config
    trained = loading.read_trained("minilm-mlm", args.out, c)
    first = min((int(k.split(".")[1]) for k in trained if k.startswith("layer.")), default=c.num_layers)
    encs, n_held, _, draws, held, _ = prepare(args, published)
    encs, draws = encs[:n_held], [draws[i] for i in held]
    frozen = {"embed.W_T": np.asarray(published.weights["embed.W_T"])}
    start = {k: np.asarray(published.weights[k]) for k in trained}
    cloze = {"model": cloze_scores(loading.minilm_mlm_from(published, trained)), "frozen head": cloze_scores(published)}
    print(f"{args.out} (layers {first}..{c.num_layers - 1} trained) against MiniLM's frozen head:")
    for title, (es, ds) in {"the held-out lines as they are": (encs, draws), "each held-out line ended with a "
                            "period": ([end_with_period(published, e) for e in encs],
                                       [(i, period_draw(published, m)) for i, m in draws])}.items():
        every = list(range(len(ds)))
        Zs = dict(zip(every, features(published, ds, first, progress=False)))
        batches = build_batches(ds, Zs, every, 256, first)
        groups, targets = heldout_groups(published, ds, every)
        others = heldout_others(published, es, ds, every)
        heldout = {"model": heldout_scores(trained, frozen, batches, c, groups, targets, others),
                   "frozen head": heldout_scores(start, frozen, batches, c, groups, targets, others)}
        print(f"\nheld-out: {title}")
        print(goals_table(heldout, cloze, ("model", "frozen head")))
    return 0


def run(args) -> int:
    t_start = time.perf_counter()
    published = bv.load("minilm", backend="numpy")  # the published encoder + the head fitted on it (the start)
    c = published.config
    L, k = c.num_layers, args.layers
    first = L - k
    given = None if args.init is None else loading.read_trained("minilm-mlm", args.init, c)  # checked before any work
    encs, n_held, n_corpus, draws, held, train = prepare(args, published)
    say = (lambda *a: None) if args.smoke else (lambda *a: print(*a, flush=True))
    say(f"corpus: {n_corpus:,} sentences ({n_held:,} held out) + {len(encs) - n_corpus:,} usage examples, "
        f"{len(draws):,} masked draws ({args.masking}); k = {k} (layers {first}..{L - 1} trained)")
    if (c.vocab_size, c.hidden_size, c.ffn_size, c.num_heads) != (MLM_V, MLM_H, MLM_FFN, MLM_HEADS):
        raise AssertionError("step_bytes's sizes are not MiniLM's")
    if not (args.smoke or args.check):  # the weights (float16) and their JSON must fit, before any work
        check_free_space(args.out.parent, 2**20 + 2 * sum(int(np.size(published.weights[key]))
                                                          for key in trained_names(published.weights, first)))
    need = 2 * 4 * c.hidden_size * sum(len(m.ids) for _, m in draws) + step_bytes(args.batch, k)
    if need > available_memory():
        print(f"this run needs about {need / 2**30:.1f} GiB (the frozen layers' output for {len(draws):,} draws, "
              f"twice: the cache and the batches; and a step) and {available_memory() / 2**30:.1f} GiB is "
              "available: pass --sentences, or free memory; nothing done", file=sys.stderr)
        return 1
    t_feat = time.perf_counter()
    Z = cached_features(published, draws, first, args.seed, args.cache, progress=not args.smoke)
    feat_s = time.perf_counter() - t_feat
    train_batches = build_batches(draws, Z, train, args.batch, first)
    held_batches = build_batches(draws, Z, held, 256, first)
    say(f"frozen layers: {feat_s:.0f} s; {len(train_batches):,} training batches a epoch, "
        f"{sum(len(b.targets) for b in train_batches):,} masked rows")

    weights = {key: np.asarray(v) for key, v in published.weights.items()}
    start = {key: weights[key] for key in trained_names(weights, first)}  # the published layers and the k = 0 head
    frozen = {"embed.W_T": weights["embed.W_T"]}
    init = start
    if given is not None:
        init = {**start, **given}
        if set(init) != set(start):
            lowest = min(schema.split_key(x)[0] for x in given if x.startswith("layer."))
            print(f"--init {args.init} holds trained layers from {lowest} on, below the {first} that --layers {k} "
                  f"trains: pass --layers {L - lowest} or more", file=sys.stderr)
            return 2

    def heldout_loss(params):
        ranks, losses = mlm.ranks_and_losses(params, frozen, held_batches, c, np)
        return float(np.mean(losses))

    curve = []
    curve_off = args.smoke or args.heldout_every == 0
    t_fit = time.perf_counter()

    def on_log(entry, params=None):
        curve.append(entry)
        say(f"  step {entry[0]:>5,}  train loss {entry[1]:.4f}" +
            (f"  held-out {entry[2]:.4f}" if len(entry) > 2 and entry[2] is not None else "") +
            f"  ({time.perf_counter() - t_fit:.0f} s)")
        if not all(math.isfinite(v) for v in entry[1:] if v is not None):
            raise Diverged(f"the loss is not finite at step {entry[0]} ({entry[1:]})")

    try:
        params, log = mlm.train(init, frozen, train_batches, c, np, rng=np.random.default_rng([args.seed, 3]),
                                epochs=args.epochs, peak_lr=lambda key: args.lr_head if key.startswith("mlm.") else
                                args.lr_layers, log_every=1 if args.smoke else LOG_EVERY, on_log=on_log,
                                steps=args.steps, heldout=None if curve_off else heldout_loss,
                                heldout_every=None if curve_off else args.heldout_every)
    except Diverged as e:
        print(f"training diverged: {e}; nothing written (try lower --lr-layers / --lr-head)", file=sys.stderr)
        return 1
    if not finite(params):
        print("training diverged: a trained weight is not finite; nothing written (try lower --lr-layers / "
              "--lr-head)", file=sys.stderr)
        return 1
    fit_s = time.perf_counter() - t_fit
    if args.smoke:
        return smoke_check([[s, round(l, 5)] for s, l, *_ in log], args.write_log)

    # held-out numbers: the adapted model, the frozen head (load("minilm") as it ships), the unigram guess
    groups, targets = heldout_groups(published, draws, held)
    others = heldout_others(published, encs, draws, held)
    tr_targets = np.concatenate([b.targets for b in train_batches])
    stored = {key: np.asarray(v, dtype=np.float16) for key, v in params.items()}
    as_stored = {key: v.astype(np.float32) for key, v in stored.items()}
    if not finite(as_stored):
        print("a trained weight overflows float16 storage; nothing written", file=sys.stderr)
        return 1
    results = {"minilm-mlm": heldout_scores(params, frozen, held_batches, c, groups, targets, others),
               "frozen head": heldout_scores(start, frozen, held_batches, c, groups, targets, others),
               "unigram": T.summarise(*T.unigram_ranks(tr_targets, targets, c.vocab_size), groups),
               "minilm-mlm, float16 storage": heldout_scores(as_stored, frozen, held_batches, c, groups, targets,
                                                             others)}
    adapted = loading.minilm_mlm_from(published, as_stored)
    shown, cloze = predict(adapted, EXAMPLES), cloze_scores(adapted)
    shown_frozen, cloze_frozen = predict(published, EXAMPLES), cloze_scores(published)
    total_s = time.perf_counter() - t_start

    data = safetensors_bytes(stored, first)
    meta = {
        "encoder": loading.MINILM_REPO, "trained_layers": list(range(first, L)), "k": k, "seed": args.seed,
        "init": None if args.init is None else {"file": args.init.name, "sha256": hashlib.sha256(
            read_regular(args.init)).hexdigest()},
        "train_sentences": args.train_sentences, "mask_seed": args.mask_seed,
        "text": args.text, "headwords": args.headwords, "end_period": args.end_period, "sentences": n_corpus,
        "heldout_sentences": n_held, "extra_sentences": len(encs) - n_corpus,
        "draws": args.draws, "masking": args.masking, "rates": [round(100 * r) for r in args.rates],
        "max_tokens": T.MAX_TOKENS,
        "epochs": args.epochs, "batch": args.batch, "steps": len(train_batches) * args.epochs
        if args.steps is None else min(args.steps, len(train_batches) * args.epochs),
        "lr_layers": args.lr_layers, "lr_head": args.lr_head, "warmup": 0.05, "optimizer": "Adam (no weight decay)",
        "trained_parameters": int(sum(v.size for v in params.values())),
        "masked_rows": {"train": int(len(tr_targets)), "heldout": int(len(targets))},
        "seconds": {"frozen_layers": round(feat_s, 1), "fit": round(fit_s, 1), "total": round(total_s, 1)},
        "threads": args.threads, "numpy": np.__version__,
        "loss_curve": [[e[0], round(e[1], 4), None if e[2] is None else round(e[2], 4)] for e in log],
        "heldout": results, "cloze": {"minilm-mlm": cloze, "minilm": cloze_frozen},
        "examples": {"minilm-mlm": shown, "minilm": shown_frozen},
        "file": {**WF.file_record(args.out.name, data), "dtype": "float16", "float32_bytes": 4 * int(sum(v.size for v in params.values()))},
    }
    if args.check:
        same = data == read_regular(args.out)
        print(f"{args.out}: {'the same bytes' if same else 'DIFFERENT bytes'} after training again ({total_s:.0f} s)")
        return 0 if same else 1
    write_outputs(args.out, data, json.dumps(meta, indent=1) + "\n")
    print(report(meta))
    print(f"wrote {args.out} ({len(data):,} bytes) and its .json; {total_s:.0f} s in all")
    return 0


def trained_names(weights, first: int) -> list:
    """The tensors a run trains: the head's and those of layers first .. L-1."""
    return [key for key in weights if key.startswith("mlm.") or
            (schema.split_key(key)[0] is not None and schema.split_key(key)[0] >= first)]


class Diverged(Exception):
    """The training loss or a weight is not finite."""


def safetensors_bytes(stored: dict, first: int) -> bytes:
    return WF.as_bytes(WF.save_minilm_mlm, stored, first=first)


def write_outputs(out: Path, data: bytes, info: str) -> None:
    """The weights and their JSON, replaced as a pair (private_files.write_pair)."""
    write_pair(out, data, info)


def smoke_check(log, write: bool) -> int:
    """The smoke run's per-step losses against the committed log (tolerance: another BLAS rounds differently)."""
    if write:
        SMOKE_LOG.write_text(json.dumps({"settings": SMOKE, "losses": log}, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {SMOKE_LOG}")
        return 0
    want = json.loads(SMOKE_LOG.read_text(encoding="utf-8"))["losses"]
    ok = [s for s, _ in log] == [s for s, _ in want] and \
        all(abs(a[1] - b[1]) <= 1e-3 * abs(b[1]) for a, b in zip(log, want))
    print(f"smoke run: losses {[l for _, l in log]}; committed {[l for _, l in want]}: {'match' if ok else 'DIFFER'}")
    return 0 if ok else 1


def _pct(x) -> str:
    """A share as a percentage; '-' for a group with no rows (a small run's held-out split)."""
    return "-" if x is None else f"{100 * x:.1f}%"


def goals_table(heldout: dict, cloze: dict, who) -> str:
    """The study's measures, one row per model: the cloze sets' top-1 / top-5 / echo rate, the held-out rows'."""
    pct = _pct
    lines = ["| | everyday (30): top-1 / top-5 / echo | cloze_sentences (30): top-1 / top-5 / echo | held-out "
             "content [MASK]: top-1 / top-5 / echo | held-out all: top-5 / echo / loss |", "|---|---|---|---|---|"]
    for w in who:
        cl, h = cloze[w], heldout[w]
        cells = [" / ".join(pct(cl[f][m]) for m in ("top1", "top5", "echo")) for f in ("everyday", "cloze_sentences")]
        cells.append(" / ".join(pct(h["content [MASK]"][m]) for m in ("top1", "top5", "echo")))
        cells.append(f"{pct(h['all']['top5'])} / {pct(h['all']['echo'])} / "
                     + ("-" if h['all']['loss'] is None else f"{h['all']['loss']:.2f}"))
        lines.append(f"| {w} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(info: dict) -> str:
    """The held-out numbers, the cloze score and the examples of a run's JSON as markdown (for the READMEs)."""
    held = info["heldout"]
    groups = ("all", "content", "function", "other", "[MASK]", "content [MASK]", "function [MASK]")
    head = " | ".join(f"{g} ({held['unigram'][g]['rows']:,})" for g in groups)
    lines = [f"| held-out, top-1 / top-5 | {head} |",
             "|---" * (len(groups) + 1) + "|"]
    for who in ("minilm-mlm", "minilm-mlm, float16 storage", "frozen head", "unigram"):
        lines.append(f"| {who} | " + " | ".join(f"{_pct(held[who][g]['top1'])} / {_pct(held[who][g]['top5'])}"
                                               for g in groups) + " |")
    who = ("minilm-mlm", "frozen head", "unigram")
    lines.append("| held-out loss (nats): minilm-mlm / frozen head / unigram | " + " | ".join(
        " / ".join("-" if held[w][g]['loss'] is None else f"{held[w][g]['loss']:.2f}" for w in who)
        for g in groups) + " |")
    cl = info["cloze"]
    if "everyday" in cl["minilm-mlm"]:  # newer runs also hold the echo rate and the fresh everyday set
        lines += ["", goals_table(held, {"minilm-mlm": cl["minilm-mlm"], "frozen head": cl["minilm"]},
                                  ("minilm-mlm", "frozen head"))]
        cl = {w: v["cloze_sentences"] for w, v in cl.items()}
    lines += ["", f"Cloze sentences (training/corpus/cloze_sentences.tsv): the answer in the top 5 for "
              f"{cl['minilm-mlm']['top5_hits']} of {cl['minilm-mlm']['sentences']} with minilm-mlm "
              f"({100 * cl['minilm-mlm']['top5']:.0f}%), {cl['minilm']['top5_hits']} with minilm's frozen head.",
              "", "| sentence | minilm-mlm's top 5 | minilm's (frozen head) top 5 |", "|---|---|---|"]
    ex = info["examples"]
    lines += [f"| {s} | {', '.join(top)} | {', '.join(ex['minilm'][s])} |" for s, top in ex["minilm-mlm"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
