# %% 09.1
def my_shared_total(V, H, L, F, P):
    return (V + P + 2) * H + 2 * H + (4 * (H**2 + H) + 2 * H * F + F + H + 4 * H) + H**2 + H  # no L: one layer stored

# %% 09.2
def my_biases(L, H, F):
    return L * (4 * H + F + H) + H  # b^Q, b^K, b^V, b^O, b^up, b^down per layer, and the pooler's b

# %% 09.3
my_prediction = 335  # 335,141,888: "340M" is two significant figures
