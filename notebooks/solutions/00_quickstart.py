# Solutions of lesson 00 · Quickstart. Each block replaces the exercise cell tagged with its id.

# %% 00.1
my_prediction = "cat"  # "it" stands for the cat; this head sends most rows there

# %% 00.2
sep = tr.tokens.index("[SEP]")
my_sep_share = A[:, sep].mean()

# %% 00.3
safe = np.where(A > 0, A, 1.0)  # log(1) = 0 where a weight is exactly 0
my_entropy = -(A * np.log(safe)).sum(axis=-1).mean()
