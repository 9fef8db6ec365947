# Solutions of lesson 17 · The BERT family. Each block replaces the exercise cell tagged with its id.

# %% 17.1
c = configs["albert-base-v2"]
H, F = c.hidden_size, c.ffn_size
embeddings = (c.vocab_size + c.max_positions + c.type_vocab_size) * H + 2 * H
layer = 4 * (H * H + H) + 2 * H * F + F + H + 4 * H
my_unshared = embeddings + c.num_layers * layer + H * H + H

# %% 17.2
o = rob.config.pad_token_id + 1
my_rows = list(range(o, o + 5))

# %% 17.3
my_logits = np.asarray(tr_head["pooler.out"]) @ W + b
