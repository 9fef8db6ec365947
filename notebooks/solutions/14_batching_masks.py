# %% 14.1
my_mask = np.broadcast_to(np.where(mask[b][None, :] == 0, -np.inf, 0.0), (n, n))

# %% 14.2
hide = np.where(np.triu(np.ones((n, n), dtype=bool), k=1), -np.inf, 0.0)
my_causal = scipy.special.softmax(E0 + hide, axis=-1)

# %% 14.3
my_prediction = (B, L, n_h, n, n)
