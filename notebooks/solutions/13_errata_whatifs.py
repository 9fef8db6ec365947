# %% 13.1
my_act = up / (1 + np.exp(-1.702 * up))

# %% 13.2
my_scores = Q @ K.transpose(0, 2, 1) / np.sqrt(H)

# %% 13.3
my_prediction = (d_k, model.config.ffn_size)  # 32 columns of attn.out, all 1536 of ffn.up
