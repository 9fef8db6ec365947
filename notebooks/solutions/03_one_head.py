# Solutions of lesson 03 · One attention head. Each block replaces the exercise cell tagged with its id.

# %% 03.1
my_prediction = 8 / np.sqrt(768)  # std of q.k is sqrt(64) = 8; divided by sqrt(768) ~ 27.7

# %% 03.2
Qh = tr.get("attn.q", layer=LAYER, head=HEAD)  # [n, d_k]
Kh = tr.get("attn.k", layer=LAYER, head=HEAD)
my_scores = Qh @ Kh.T / np.sqrt(Qh.shape[-1])

# %% 03.3
Vh = tr.get("attn.v", layer=LAYER, head=HEAD)  # [n, d_k]
my_Z = tr.get("attn.probs", layer=LAYER, head=HEAD) @ Vh

# %% 03.4
my_head = (3, 1)
