# Solutions of lesson 02 · Embeddings. Each block replaces the exercise cell tagged with its id.

# %% 02.1
my_X = (W["embed.W_T"][np.array(tr_pair.ids)] + W["embed.W_P"][: tr_pair.n]
        + W["embed.W_S"][np.array(tr_pair.segments)])

# %% 02.2
eps = model.config.layer_norm_eps
x_hat = (my_X - my_X.mean(-1, keepdims=True)) / np.sqrt(my_X.var(-1, keepdims=True) + eps)
my_Z0 = x_hat * W["embed.ln.gamma"] + W["embed.ln.beta"]

# %% 02.3
my_prediction = True  # attention mixes the sentences: the first one's vectors move too

# %% 02.4
def my_count(c):
    return (c.vocab_size + c.max_positions + c.type_vocab_size) * c.hidden_size + 2 * c.hidden_size
