# %% 03.1
p = np.arange(64)[:, None]  # [64, 1]
angle = p / 10000 ** (np.arange(0, 16, 2)[None, :] / 16)  # [64, 8]
my_pe = np.zeros((64, 16))
my_pe[:, 0::2], my_pe[:, 1::2] = np.sin(angle), np.cos(angle)

# %% 03.2
U = W_P / np.linalg.norm(W_P, axis=1, keepdims=True)
sims = U @ U.T  # [512, 512]
my_decay = np.array([np.diagonal(sims, offset=k).mean() for k in range(1, 33)])

# %% 03.3
my_prediction = False
