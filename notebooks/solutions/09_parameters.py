# %% 09.1
def my_total(V, H, L, F, P):
    return (V + P + 2) * H + 2 * H + L * (4 * (H**2 + H) + 2 * H * F + F + H + 4 * H) + H**2 + H

# %% 09.2
def my_wo(L, H):
    return L * (H * H + H)

# %% 09.3
my_prediction = 335  # 335,141,888: "340M" is two significant figures
