# Solutions of lesson 19 · Capstone. Each block replaces the exercise cell tagged with its id.

# %% 19.1
def my_layer(Z, W, l):
    """One encoder layer: Z = Z_(l-1) [n, H] -> a dict of its intermediates, keyed like the trace."""
    p = f"layer.{l}."  # W[p + "attn.W_Q"] is [H, H] (input x output), W[p + "attn.b_Q"] is [H]
    w = {k[len(p):]: np.asarray(v, dtype=np.float64) for k, v in W.items() if k.startswith(p)}
    n = len(Z)

    def heads(x):  # [n, H] -> [n_h, n, d_k]
        return x.reshape(n, n_h, d_k).transpose(1, 0, 2)

    def layer_norm(x, gamma, beta):  # over each token's H features
        return gamma * (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) + beta

    out = {}
    out["attn.q"] = heads(Z @ w["attn.W_Q"] + w["attn.b_Q"])  # head x token x head_dim
    out["attn.k"] = heads(Z @ w["attn.W_K"] + w["attn.b_K"])  # head x token x head_dim
    out["attn.v"] = heads(Z @ w["attn.W_V"] + w["attn.b_V"])  # head x token x head_dim
    out["attn.scores"] = out["attn.q"] @ out["attn.k"].transpose(0, 2, 1) / np.sqrt(d_k)  # head x query x key
    e = np.exp(out["attn.scores"] - out["attn.scores"].max(-1, keepdims=True))
    out["attn.probs"] = e / e.sum(-1, keepdims=True)  # softmax over the keys
    out["attn.context"] = out["attn.probs"] @ out["attn.v"]  # head x token x head_dim
    out["attn.concat"] = out["attn.context"].transpose(1, 0, 2).reshape(n, n_h * d_k)  # token x hidden
    out["attn.out"] = out["attn.concat"] @ w["attn.W_O"] + w["attn.b_O"]
    out["attn.resid"] = Z + out["attn.out"]  # the attention half's residual: Z_(l-1)
    out["attn.ln"] = layer_norm(out["attn.resid"], w["attn.ln.gamma"], w["attn.ln.beta"])
    out["ffn.up"] = out["attn.ln"] @ w["ffn.W_up"] + w["ffn.b_up"]  # token x ffn
    out["ffn.act"] = 0.5 * out["ffn.up"] * (1 + erf(out["ffn.up"] / np.sqrt(2)))  # exact GELU
    out["ffn.down"] = out["ffn.act"] @ w["ffn.W_down"] + w["ffn.b_down"]
    out["ffn.resid"] = out["attn.ln"] + out["ffn.down"]  # the feed-forward half's residual: Z-bar
    out["ffn.ln"] = layer_norm(out["ffn.resid"], w["ffn.ln.gamma"], w["ffn.ln.beta"])
    return out

# %% 19.2
my_sentence = my_Z_L.mean(axis=0)  # [H]: the mean over the tokens
