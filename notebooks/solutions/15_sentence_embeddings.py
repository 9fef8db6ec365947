# %% 15.1
my_embedding = (Z_L * m[:, None]).sum(axis=0) / m.sum()

# %% 15.2
my_sims = np.array([emb[a] @ emb[b] / (np.linalg.norm(emb[a]) * np.linalg.norm(emb[b])) for a, b in pairs])

# %% 15.3
my_pair = ("The doctor examined the patient carefully.", "A physician checked a sick man thoroughly.")

# %% 15.4
my_prediction = True  # the same words, each moved a little: the means stay close
