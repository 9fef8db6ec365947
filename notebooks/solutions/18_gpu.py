# %% 18.1
my_delta = np.abs(a - b).max()

# %% 18.2
my_bytes = cfg.num_layers * cfg.num_heads * n_long * n_long * 4

# %% 18.3
my_prediction = 192  # 24 * 16 * 512 * 512 * 2 / 2**20 (BERT-base's 144 MiB x 2 layers x 4/3 heads / 2 bytes)
