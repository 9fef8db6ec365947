# %% 11.1
onehot = np.zeros_like(y)
onehot[np.arange(N), targets] = 1.0
my_dy = (softmax - onehot) / N  # the loss is a mean over the N rows

# %% 11.2
my_dbias = my_dy.sum(axis=0)  # the bias is added to every row: sum the rows' gradients

# %% 11.3
my_count = (1, 5)  # round(0.45) = 0, but at least one; round(0.15 * 33) = round(4.95) = 5

# %% 11.4
my_dV = P_h.T @ dC  # [n, d_k]: every output row i sends A[i, j] * dC[i] back to value row j

# %% 11.5
my_dS = P_h * (dP - (dP * P_h).sum(axis=-1, keepdims=True))  # [n, n]: softmax's backward, row by row
