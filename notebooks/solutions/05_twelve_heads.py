# Solutions of lesson 05 · Twelve heads. Each block replaces the exercise cell tagged with its id.

# %% 05.1
heads, n, d_ = Zh.shape
my_concat = Zh.transpose(1, 0, 2).reshape(n, heads * d_)

# %% 05.2
def my_head_part(h):
    W_O = W[f"layer.{LAYER}.attn.W_O"]
    return Zh[h] @ W_O[h * d:(h + 1) * d]

# %% 05.3
my_prediction = False  # the trained weights expect W^O's mix: the final vectors turn far away
