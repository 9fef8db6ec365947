# %% 08.1
my_minilm = (V_m + P_m + 2) * H_m + 2 * H_m + L_m * (4 * (H_m**2 + H_m) + 2 * H_m * F_m + F_m + H_m + 4 * H_m) \
    + H_m**2 + H_m

# %% 08.2
my_wo = L * (H * H + H)

# %% 08.3
my_prediction = 340
