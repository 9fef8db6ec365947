# Solutions of lesson 16 · What heads look at across a corpus. Each block replaces the exercise cell tagged with its id.

# %% 16.1
l_next, h_next, _ = r.top("next", 1)[0]
P = np.asarray(btr[0].get("attn.probs", layer=l_next, head=h_next), dtype=np.float64)  # [n, n]
my_next = np.diagonal(P, offset=1).sum() / P.shape[0]

# %% 16.2
order = np.argsort(r["entropy"], axis=None, kind="stable")[:3]
my_focused = [(int(k) // A, int(k) % A) for k in order]
