# %% 12.1
my_entropy = -np.sum(np.where(P > 0, P * np.log(np.where(P > 0, P, 1)), 0)) / n

# %% 12.2
my_self = np.diagonal(P0, axis1=1, axis2=2).mean(axis=1)  # [n_h]

# %% 12.3
my_prediction = "[CLS]"
