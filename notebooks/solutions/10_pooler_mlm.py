# %% 10.1
my_p = np.tanh(Z_L[0] @ W + b)

# %% 10.2
x = Z_L[m] @ w["mlm.W_t"] + w["mlm.b_t"]  # [H]
x = 0.5 * x * (1 + scipy.special.erf(x / np.sqrt(2)))  # GELU
x = (x - x.mean()) / np.sqrt(x.var() + c.layer_norm_eps) * w["mlm.ln.gamma"] + w["mlm.ln.beta"]
my_y = x @ w["embed.W_T"].T + w["mlm.bias"]  # tied: the token table, transposed   [V]

# %% 10.3
my_prediction = 1  # your prediction: "transformers" is one piece, though "transformer" is two
