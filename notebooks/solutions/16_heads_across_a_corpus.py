# Solutions of lesson 16 · What heads look at across a corpus. Each block replaces the exercise cell tagged with its id.

# %% 16.1
l_next, h_next, _ = r.top("next", 1)[0]
A = np.asarray(btr[0].get("attn.probs", layer=l_next, head=h_next), dtype=np.float64)  # [n, n]
my_next = np.diagonal(A, offset=1).sum() / A.shape[0]

# %% 16.2
order = np.argsort(r["entropy"], axis=None, kind="stable")[:3]
heads = r["entropy"].shape[1]  # per layer
my_focused = [(int(k) // heads, int(k) % heads) for k in order]
