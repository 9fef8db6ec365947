# %% 13.1
my_act = up / (1 + np.exp(-1.702 * up))

# %% 13.2
my_scores = Q @ K.transpose(0, 2, 1) / np.sqrt(H)

# %% 13.3
my_prediction = (2 * d_k, 5 * d_k)  # heads 5 and 6 own columns 160..223: 64 columns, the first 160
