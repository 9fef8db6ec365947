"""Exercises of lesson 09 (parameters): the formula exercises take a function, checked on several models."""
import bertviz_lite as bv
from bertviz_lite.params import ledger_for_config
from course.checks import equals, exercise, formula


def _configs(config):
    small = bv.BertConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, ffn_size=256,
                          max_positions=128, type_vocab_size=2)
    large = bv.BertConfig(hidden_size=1024, num_layers=24, num_heads=16, ffn_size=4096)
    return [config, bv.BertConfig(), large, small]


def _layer(c) -> int:
    """One encoder layer's parameters, from the ledger (layer 0's rows)."""
    return sum(n for _, name, _, n in ledger_for_config(c).rows if name.startswith("layer.0."))


def _emb(V, H, P):
    return (V + P + 2) * H + 2 * H


def _one(H, F):
    return 4 * (H * H + H) + 2 * H * F + F + H + 4 * H


def _shared_mistakes(config):
    return {"that is BertModel with L separate layers (109,482,240 for BERT-base): with sharing, one layer's arrays "
            "serve all L layers": lambda V, H, L, F, P: _emb(V, H, P) + L * _one(H, F) + H * H + H,
            "that leaves the layers out: the one shared layer is still stored once":
                lambda V, H, L, F, P: _emb(V, H, P) + H * H + H,
            "you left out the pooler, an H x H matrix and its bias":
                lambda V, H, L, F, P: _emb(V, H, P) + _one(H, F),
            "you left out the segment table W_S (2 rows of H)":
                lambda V, H, L, F, P: (V + P) * H + 2 * H + _one(H, F) + H * H + H,
            "you left out the layer's biases: each of its six matrix products adds one (4 H for attention, F + H for "
            "the feed-forward)": lambda V, H, L, F, P: _emb(V, H, P) + 4 * H * H + 2 * H * F + 4 * H + H * H + H,
            "b^up is as long as W^up's output, F = d_ffnn, not H":
                lambda V, H, L, F, P: _emb(V, H, P) + _one(H, F) - F + H + H * H + H}


@exercise("09.1", hint=("with sharing, the model stores the embeddings, ONE encoder layer and the pooler: the L "
                        "layers read the same arrays; count each of the three from the formula lines",
                        "one layer is its four H x H projections with biases, the feed-forward's two matrices with "
                        "their biases and two LayerNorms; does L still appear in the total?"),
          mistakes=_shared_mistakes)
def _(answer, *, config):
    cases = [(dict(V=c.vocab_size, H=c.hidden_size, L=c.num_layers, F=c.ffn_size, P=c.max_positions),
              ledger_for_config(c).total - (c.num_layers - 1) * _layer(c)) for c in _configs(config)]
    return formula(answer, cases, "my_shared_total(V, H, L, F, P)", mistakes=_shared_mistakes(config))


def _bias_mistakes(config):
    return {"close: the pooler's tanh(Z W + b) has a bias too": lambda L, H, F: L * (5 * H + F),
            "b^up is as long as W^up's output: F, not H": lambda L, H, F: L * 6 * H + H,
            "LayerNorm's beta is not counted as a bias here: count the b of the matrix products only":
                lambda L, H, F: L * (5 * H + F) + H + (2 * L + 1) * H,
            "that is one layer's biases (and the pooler's): each of the L layers has its own":
                lambda L, H, F: 5 * H + F + H,
            "a layer has four attention biases, b^Q, b^K, b^V and b^O, each H long":
                lambda L, H, F: L * (4 * H + F) + H}


@exercise("09.2", hint=("a bias is a vector added after a matrix product: find every b in the formula lines of one "
                        "layer (attention and feed-forward), then the pooler's; LayerNorm's beta is not one here",
                        "how long is each of a layer's four attention biases, and how long are b^up and b^down: as "
                        "long as their matrix's input, or its output?"), mistakes=_bias_mistakes)
def _(answer, *, config):
    def biases(c):
        return sum(n for _, name, _, n in ledger_for_config(c).rows if name.rsplit(".", 1)[-1] == "b" or name.rsplit(".", 1)[-1].startswith("b_"))  # not LayerNorm beta

    cases = [(dict(L=c.num_layers, H=c.hidden_size, F=c.ffn_size), biases(c)) for c in _configs(config)]
    return formula(answer, cases, "my_biases(L, H, F)", mistakes=_bias_mistakes(config))


@exercise("09.3", hint=("predict first: BERT-large has twice BERT-base's layers, each a third wider; its attention "
                        "and feed-forward matrices grow with H squared",),
          prediction=True, wrong=lambda answer, config: [answer + 5, answer + 1, answer - 1, str(answer), 110],
          mistakes=lambda config: {"that is the count itself: the question asks for millions, a whole number like 110":
                                   bv.reconcile(config).rows[0][1]})
def _(answer, *, config):
    total = bv.reconcile(config).rows[0][1]
    return equals(answer, round(total / 1e6))
