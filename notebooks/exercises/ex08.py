"""Exercises of lesson 08 (parameters)."""
import bertviz_lite as bv
from course import equals, exercise


@exercise("08.1", hint="BertModel = (V + P + 2) H + 2H  +  L (4(H^2 + H) + 2HF + F + H + 4H)  +  H^2 + H, "
                       "with MiniLM's V_m, H_m, L_m, F_m, P_m")
def _(answer, *, model):
    ledger = bv.count_params(model)  # BertModel: minilm's fitted masked-lm head (lesson 09) is not part of it
    return equals(answer, ledger.total - ledger.by_group().get("mlm head", 0))


@exercise("08.2", hint="each layer has one W^O (H x H) and one b^O (H): L (H^2 + H)")
def _(answer, *, ledger):
    expected = sum(count for _, name, _, count in ledger.rows if name.endswith(("attn.W_O", "attn.b_O")))
    return equals(answer, expected)


@exercise("08.3", hint="run the cell, then look at the first two digits of BERT-large's total: 335,141,888 -> ?")
def _(answer, *, config):
    total = bv.reconcile(config).rows[0][1]
    return equals(answer, int(float(f"{total:.2g}") / 1e6))
