# %% 11.1
def my_dlogits(y, targets):
    """d loss / d y for loss = mean_i -log softmax(y_i)[t_i]   [N, V] -> [N, V]."""
    p = np.exp(y - y.max(axis=-1, keepdims=True))
    p = p / p.sum(axis=-1, keepdims=True)  # each row's softmax over the vocabulary
    p[np.arange(len(targets)), targets] -= 1.0  # minus the one-hot row of the target
    return p / len(targets)  # the loss is a mean over the N rows

# %% 11.2
my_count = (1, 5)  # round(0.45) = 0, but at least one; round(0.15 * 33) = round(4.95) = 5

# %% 11.3
def my_layer_norm_backward(dy, x, gamma, eps):
    """y = gamma (x - mean) / sqrt(var + eps) + beta over the last axis   ->   (dx, dgamma, dbeta)."""
    H = x.shape[-1]
    mu = x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt(((x - mu) ** 2).mean(axis=-1, keepdims=True) + eps)
    x_hat = (x - mu) * inv
    g = dy * gamma
    dx = inv * (g - g.mean(axis=-1, keepdims=True) - x_hat * (g * x_hat).mean(axis=-1, keepdims=True))
    return dx, (dy * x_hat).reshape(-1, H).sum(axis=0), dy.reshape(-1, H).sum(axis=0)

# %% 11.4
def my_gelu_backward(dy, x):
    """y = x Phi(x)   ->   dx, at the input x."""
    Phi = 0.5 * (1.0 + erf(x / 2.0 ** 0.5))  # python floats keep float32 arrays float32
    phi = np.exp(-0.5 * x * x) / (2.0 * np.pi) ** 0.5
    return dy * (Phi + x * phi)  # the product rule

# %% 11.5
def my_linear_backward(dy, x, W):
    """y = x W + b   ->   (dx, dW, db); x [..., k], W [k, m], dy [..., m]."""
    k, m = W.shape
    dx = dy @ W.T  # [..., k]: dy goes back through W
    dW = x.reshape(-1, k).T @ dy.reshape(-1, m)  # [k, m]: every token of every example adds its share
    db = dy.reshape(-1, m).sum(axis=0)  # [m]: b is added to every row
    return dx, dW, db

# %% 11.6
def my_head_backward(dy, W, tape, Z, eps):
    """d loss / d logits [N, V] -> (d Z [N, H], the head's gradients); tape[key] holds the head's lines."""
    grads = {"mlm.bias": dy.sum(axis=0)}
    dh = dy @ W["embed.W_T"]  # logits = h W_T^T + b: back through the tied decoder
    dact, grads["mlm.ln.gamma"], grads["mlm.ln.beta"] = my_layer_norm_backward(dh, tape["mlm.act"], W["mlm.ln.gamma"],
                                                                               eps)
    ddense = my_gelu_backward(dact, tape["mlm.dense"])
    dZ, grads["mlm.W_t"], grads["mlm.b_t"] = my_linear_backward(ddense, Z, W["mlm.W_t"])
    return dZ, grads

# %% 11.7
def my_softmax_backward(dA, A):
    """A = softmax(E) over the last axis (the keys)   ->   dE."""
    return A * (dA - (dA * A).sum(axis=-1, keepdims=True))

# %% 11.8
def my_attention_backward(dC, Q, K, V, M):
    """C = softmax(Q K^T / sqrt(d_k) + M) V   ->   (dQ, dK, dV); Q, K, V, dC [..., n_h, n, d_k]."""
    scale = Q.shape[-1] ** -0.5  # 1 / sqrt(d_k), a python float
    E = (Q * scale) @ np.swapaxes(K, -1, -2) + M  # the forward's scores, mask included
    A = np.exp(E - E.max(axis=-1, keepdims=True))
    A = A / A.sum(axis=-1, keepdims=True)  # the forward's map
    dA = dC @ np.swapaxes(V, -1, -2)
    dV = np.swapaxes(A, -1, -2) @ dC
    dE = my_softmax_backward(dA, A)
    return scale * (dE @ K), scale * (np.swapaxes(dE, -1, -2) @ Q), dV

# %% 11.9
def my_layer_backward(dy, W, tape, Z, M, n_h, eps):
    """One encoder layer backwards: d Z_l [..., n, H] -> (d Z_(l-1), the layer's gradients)."""
    g = {}
    # feed-forward half: ln = LayerNorm(Z_bar + down), down = GELU(Z_bar W_up + b_up) W_down + b_down
    dres, g["ffn.ln.gamma"], g["ffn.ln.beta"] = my_layer_norm_backward(dy, tape["ffn.resid"], W["ffn.ln.gamma"], eps)
    dact, g["ffn.W_down"], g["ffn.b_down"] = my_linear_backward(dres, tape["ffn.act"], W["ffn.W_down"])
    dup = my_gelu_backward(dact, tape["ffn.up"])
    dZ_bar, g["ffn.W_up"], g["ffn.b_up"] = my_linear_backward(dup, tape["attn.ln"], W["ffn.W_up"])
    dZ_bar = dZ_bar + dres  # the residual's second path
    # attention half: attn.ln = LayerNorm(Z + concat W_O + b_O)
    dres, g["attn.ln.gamma"], g["attn.ln.beta"] = my_layer_norm_backward(dZ_bar, tape["attn.resid"],
                                                                         W["attn.ln.gamma"], eps)
    dconcat, g["attn.W_O"], g["attn.b_O"] = my_linear_backward(dres, tape["attn.concat"], W["attn.W_O"])
    dC = engine.split_heads(dconcat, n_h, np)  # undoes merge_heads
    dQ, dK, dV = my_attention_backward(dC, tape["attn.q"], tape["attn.k"], tape["attn.v"], M)
    dZ = dres  # the residual's second path
    for name, d in (("Q", dQ), ("K", dK), ("V", dV)):
        dpart, g[f"attn.W_{name}"], g[f"attn.b_{name}"] = my_linear_backward(engine.merge_heads(d, np), Z,
                                                                             W[f"attn.W_{name}"])
        dZ = dZ + dpart
    return dZ, g

# %% 11.10
def my_adam_step(p, g, m, v, t, lr):
    """One Adam step (t = 1, 2, ...) for one tensor   ->   (p, m, v)."""
    m = B1 * m + (1 - B1) * g
    v = B2 * v + (1 - B2) * g * g
    m_hat, v_hat = m / (1 - B1 ** t), v / (1 - B2 ** t)  # both averages start at 0
    return p - lr * m_hat / (np.sqrt(v_hat) + ADAM_EPS), m, v

# %% 11.11
def my_train(params, step, steps, rng, *, minibatch, grad_fn, heldout, every):
    """`steps` minibatch steps; a curve row (step, mean training loss since the last row, heldout(params))."""
    curve, losses = [], []
    for s in range(1, steps + 1):
        loss, grads = grad_fn(params, minibatch(rng))
        params = step(params, grads)
        losses.append(float(loss))
        if s % every == 0 or s == steps:
            curve.append((s, sum(losses) / len(losses), heldout(params)))
            losses = []
    return params, curve

# %% 11.12
my_pattern = "anti-diagonal"  # the hidden letter's copy sits at the mirror position 2 half + 1 - i
