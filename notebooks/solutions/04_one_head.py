# Solutions of lesson 04 · One attention head. Each block replaces the exercise cell tagged with its id.

# %% 04.1
my_prediction = 8 / np.sqrt(768)  # std of q.k is sqrt(64) = 8; divided by sqrt(768) ~ 27.7

# %% 04.2
Qh = tr.get("attn.q", layer=LAYER, head=HEAD)  # [n, d_k]
Kh = tr.get("attn.k", layer=LAYER, head=HEAD)
my_scores = Qh @ Kh.T / np.sqrt(Qh.shape[-1])

# %% 04.3
Vh = tr.get("attn.v", layer=LAYER, head=HEAD)  # [n, d_k]
my_Z = tr.get("attn.probs", layer=LAYER, head=HEAD) @ Vh

# %% 04.4
my_head = (3, 1)
