# %% 08.1
my_cos = z0 @ zL / (np.linalg.norm(z0) * np.linalg.norm(zL))

# %% 08.2
U = Z / np.linalg.norm(Z, axis=1, keepdims=True)  # unit rows   [n, H]
sims = U @ U.T  # [n, n]
my_alike = (sims.sum() - np.trace(sims)) / (n * (n - 1))

# %% 08.3
my_prediction = L  # the last layer changes the tokens most
