"""Exercises of lesson 09 (parameters): the formula exercises take a function, checked on several models."""
import bertviz_lite as bv
from bertviz_lite.params import ledger_for_config
from course import equals, exercise, formula


def _configs(config):
    small = bv.BertConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_heads=4, ffn_size=256,
                          max_positions=128, type_vocab_size=2)
    large = bv.BertConfig(hidden_size=1024, num_layers=24, num_heads=16, ffn_size=4096)
    return [config, bv.BertConfig(), large, small]


@exercise("09.1", hint=("BertModel = embeddings + L encoder layers + the pooler; write each as a formula of the sizes",
                        "embeddings (V + P + 2) H + 2H; a layer 4(H^2 + H) for Q, K, V, O, then the FFN's two "
                        "matrices with their biases, then two LayerNorms (2H each); the pooler H^2 + H"))
def _(answer, *, config):
    cases = [(dict(V=c.vocab_size, H=c.hidden_size, L=c.num_layers, F=c.ffn_size, P=c.max_positions),
              ledger_for_config(c).total) for c in _configs(config)]
    return formula(answer, cases, "my_total(V, H, L, F, P)")


@exercise("09.2", hint=("each layer has one W^O (H x H) and one bias b^O (H)",
                        "count one layer's W^O and b^O, then multiply by the number of layers"))
def _(answer, *, config):
    def wo(c):
        return sum(n for _, name, _, n in ledger_for_config(c).rows if name.endswith(("attn.W_O", "attn.b_O")))

    cases = [(dict(L=c.num_layers, H=c.hidden_size), wo(c)) for c in _configs(config)]
    return formula(answer, cases, "my_wo(L, H)")


@exercise("09.3", hint=("predict first: BERT-large has twice BERT-base's layers, each a third wider; its attention "
                        "and feed-forward matrices grow with H squared",),
          prediction=True, wrong=lambda answer, config: [answer + 5, answer + 1, answer - 1, str(answer), 110])
def _(answer, *, config):
    total = bv.reconcile(config).rows[0][1]
    return equals(answer, round(total / 1e6))
