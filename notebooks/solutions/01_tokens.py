# Solutions of lesson 01 · Tokens. Each block replaces the exercise cell tagged with its id.

# %% 01.1
tokens = list(tr_pair.tokens)
first_sep = tokens.index("[SEP]")
my_segments = [0] * (first_sep + 1) + [1] * (len(tokens) - first_sep - 1)

# %% 01.2
my_M = np.where(np.array(tr_pad.mask) == 1, 0.0, -np.inf)

# %% 01.3
my_word = "electroencephalography"  # electro ##ence ##pha ##log ##raphy
