# Solutions of lesson 07 · The feed-forward block. Each block replaces the exercise cell tagged with its id.

# %% 07.1
pre = tr.get("ffn.up", layer=LAYER).astype(np.float64)
my_act = 0.5 * pre * (1.0 + erf(pre / np.sqrt(2.0)))

# %% 07.2
my_prediction = 0.6  # ReLU throws away the negative side: the sentence vector turns a lot

# %% 07.3
z_out = tr.get("ffn.act", layer=LAYER) @ W[p + "W_down"] + W[p + "b_down"]
r = tr.get("attn.ln", layer=LAYER) + z_out
r_hat = (r - r.mean(-1, keepdims=True)) / np.sqrt(r.var(-1, keepdims=True) + c.layer_norm_eps)
my_Z = W[p + "ln.gamma"] * r_hat + W[p + "ln.beta"]
