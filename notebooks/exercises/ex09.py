"""Exercises of lesson 09 (parameters): the formula exercises take a function, checked on several models."""
import bertviz_lite as bv
from bertviz_lite.params import ledger_for_config
from course import equals, exercise, formula


def _configs(config):
    small = bv.BertConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, ffn_size=256,
                          max_positions=128, type_vocab_size=2)
    large = bv.BertConfig(hidden_size=1024, num_layers=24, num_heads=16, ffn_size=4096)
    return [config, bv.BertConfig(), large, small]


def _layer(c) -> int:
    """One encoder layer's parameters, from the ledger (layer 0's rows)."""
    return sum(n for _, name, _, n in ledger_for_config(c).rows if name.startswith("layer.0."))


@exercise("09.1", hint=("with sharing, the model stores the embeddings, ONE encoder layer and the pooler: the L "
                        "layers read the same arrays; count each of the three from the formula lines",
                        "one layer is its four H x H projections with biases, the feed-forward's two matrices with "
                        "their biases and two LayerNorms; does L still appear in the total?"))
def _(answer, *, config):
    cases = [(dict(V=c.vocab_size, H=c.hidden_size, L=c.num_layers, F=c.ffn_size, P=c.max_positions),
              ledger_for_config(c).total - (c.num_layers - 1) * _layer(c)) for c in _configs(config)]
    if callable(answer):
        (kw, _), c = cases[1], bv.BertConfig()
        got = answer(**kw)
        if got == ledger_for_config(c).total:
            return False, ("that is BertModel with L separate layers (109,482,240 for BERT-base): with sharing, one "
                           "layer's arrays serve all L layers")
        if got == ledger_for_config(c).total - c.num_layers * _layer(c):
            return False, "that leaves the layers out: the one shared layer is still stored once"
    return formula(answer, cases, "my_shared_total(V, H, L, F, P)")


@exercise("09.2", hint=("a bias is a vector added after a matrix product: find every b in the formula lines of one "
                        "layer (attention and feed-forward), then the pooler's; LayerNorm's beta is not one here",
                        "each of a layer's four attention projections has an H-long bias; the feed-forward's two "
                        "biases are as long as each matrix's output; then multiply by L and add the pooler's"))
def _(answer, *, config):
    def biases(c):
        return sum(n for _, name, _, n in ledger_for_config(c).rows if name.rsplit(".", 1)[-1] == "b" or name.rsplit(".", 1)[-1].startswith("b_"))  # not LayerNorm beta

    cases = [(dict(L=c.num_layers, H=c.hidden_size, F=c.ffn_size), biases(c)) for c in _configs(config)]
    if callable(answer):
        c = bv.BertConfig()
        got = answer(L=c.num_layers, H=c.hidden_size, F=c.ffn_size)
        if got == biases(c) - c.hidden_size:
            return False, "close: the pooler's tanh(Z W + b) has a bias too"
        if got == biases(c) - c.num_layers * (c.ffn_size - c.hidden_size):
            return False, "b^up is as long as W^up's output: F, not H"
    return formula(answer, cases, "my_biases(L, H, F)")


@exercise("09.3", hint=("predict first: BERT-large has twice BERT-base's layers, each a third wider; its attention "
                        "and feed-forward matrices grow with H squared",),
          prediction=True, wrong=lambda answer, config: [answer + 5, answer + 1, answer - 1, str(answer), 110])
def _(answer, *, config):
    total = bv.reconcile(config).rows[0][1]
    return equals(answer, round(total / 1e6))
