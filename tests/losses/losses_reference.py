"""Slow NumPy references, written from the papers' formulas in their notation, one plain loop per sum.

They are deliberately *not* the recursions the torch code uses: GAE and V-trace are written as the explicit
sums of the papers (Schulman et al. 2016 eq. 16; Espeholt et al. 2018 eq. 1), so an error in the fast
recursion cannot be repeated here. gamma_t is the per-step discount gamma * (1 - done_t), so the paper's
gamma^(t-s) becomes the product gamma_s ... gamma_{t-1}.
"""

from __future__ import annotations

import numpy as np


def product(factors) -> float:
    result = 1.0
    for factor in factors:
        result *= factor
    return result


def n_step_returns(r, V_T, gamma):
    """G_s = sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i) r_t + (prod_{i=s}^{T-1} gamma_i) V(x_T)."""
    T, B = r.shape
    G = np.zeros((T, B))
    for b in range(B):
        for s in range(T):
            G[s, b] = sum(product(gamma[s:t, b]) * r[t, b] for t in range(s, T))
            G[s, b] += product(gamma[s:T, b]) * V_T[b]
    return G


def gae(r, V, V_T, gamma, lam):
    """A_t = sum_{l>=0} (prod_{i=t}^{t+l-1} gamma_i lam) delta_{t+l}, delta_t = r_t + gamma_t V(s_{t+1}) - V(s_t)."""
    T, B = r.shape
    A = np.zeros((T, B))
    for b in range(B):
        V_next = np.append(V[1:, b], V_T[b])
        delta = r[:, b] + gamma[:, b] * V_next - V[:, b]
        for t in range(T):
            A[t, b] = sum(product(gamma[t : t + l, b] * lam) * delta[t + l] for l in range(T - t))
    return A, A + V


def vtrace(mu_logp, pi_logp, r, V, V_T, gamma, rho_bar=1.0, pg_rho_bar=1.0, c_bar=1.0, lam=1.0):
    """Espeholt et al. 2018, eq. 1:
    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V,
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)), rho_t = min(rho_bar, pi/mu), c_i = lam min(c_bar, pi/mu);
    policy-gradient advantage pg_rho_s (r_s + gamma_s v_{s+1} - V(x_s)) with v_T = V(x_T).
    Returns (vs, pg_advantages, pg_rhos, advantages = r_s + gamma_s v_{s+1} - V(x_s))."""
    T, B = r.shape
    vs = np.zeros((T, B))
    pg_advantages = np.zeros((T, B))
    pg_rhos = np.zeros((T, B))
    advantages = np.zeros((T, B))
    for b in range(B):
        ratio = np.exp(pi_logp[:, b] - mu_logp[:, b])
        rho = np.minimum(rho_bar, ratio)
        c = lam * np.minimum(c_bar, ratio)
        V_next = np.append(V[1:, b], V_T[b])
        delta_V = rho * (r[:, b] + gamma[:, b] * V_next - V[:, b])
        for s in range(T):
            vs[s, b] = V[s, b] + sum(
                product(gamma[s:t, b] * c[s:t]) * delta_V[t] for t in range(s, T)
            )
        vs_next = np.append(vs[1:, b], V_T[b])
        for s in range(T):
            advantages[s, b] = r[s, b] + gamma[s, b] * vs_next[s] - V[s, b]
            pg_rhos[s, b] = min(pg_rho_bar, ratio[s])
            pg_advantages[s, b] = pg_rhos[s, b] * advantages[s, b]
    return vs, pg_advantages, pg_rhos, advantages


def ppo(new_logp, old_logp, A, V, V_old, R, H, mask, clip, value_coef, entropy_coef, value_clip, normalize):
    """Schulman et al. 2017: L = E[-min(r_t A_t, clip(r_t, 1-eps, 1+eps) A_t)] + c1 E[0.5 (V - R)^2] - c2 E[H],
    expectations over the real (mask = 1) samples only. Returns (loss, stats dict of floats)."""
    real = mask.reshape(-1) != 0
    pick = lambda x: np.asarray(x, dtype=np.float64).reshape(-1)[real]  # noqa: E731
    new_logp, old_logp, A, V, R, H = map(pick, (new_logp, old_logp, A, V, R, H))
    if not real.any():
        return 0.0, dict(policy_loss=0.0, value_loss=0.0, entropy=0.0, approx_kl=0.0, clip_fraction=0.0)
    if normalize:
        A = (A - A.mean()) / (A.std() + 1e-8)
    policy_terms, value_terms, kl_terms, clipped = [], [], [], []
    for i in range(len(A)):
        ratio = np.exp(new_logp[i] - old_logp[i])
        policy_terms.append(-min(ratio * A[i], np.clip(ratio, 1 - clip, 1 + clip) * A[i]))
        value_error = 0.5 * (V[i] - R[i]) ** 2
        if value_clip is not None:
            V_old_i = pick(V_old)[i]
            V_clipped = V_old_i + np.clip(V[i] - V_old_i, -value_clip, value_clip)
            value_error = max(value_error, 0.5 * (V_clipped - R[i]) ** 2)
        value_terms.append(value_error)
        kl_terms.append((ratio - 1) - np.log(ratio))
        clipped.append(float(abs(ratio - 1) > clip))
    stats = dict(
        policy_loss=np.mean(policy_terms),
        value_loss=np.mean(value_terms),
        entropy=np.mean(H),
        approx_kl=np.mean(kl_terms),
        clip_fraction=np.mean(clipped),
    )
    loss = stats["policy_loss"] + value_coef * stats["value_loss"] - entropy_coef * stats["entropy"]
    return loss, stats


def impala(pi_logp, V, H, vs, pg_advantages, mask, value_coef, entropy_coef):
    """Espeholt et al. 2018 section 4.2, as means over the real samples:
    E[-pg_adv_s log pi(a_s|x_s)] + c1 E[0.5 (v_s - V(x_s))^2] - c2 E[H(pi(.|x_s))]."""
    real = mask != 0
    if not real.any():
        return 0.0
    policy = np.mean(-pg_advantages[real] * pi_logp[real])
    value = np.mean(0.5 * (vs[real] - V[real]) ** 2)
    return policy + value_coef * value - entropy_coef * np.mean(H[real])


def a3c(pi_logp, V, V_T, H, r, gamma, mask, value_coef, entropy_coef):
    """Mnih et al. 2016 (algorithm S3) as means over the real samples: R_t the n-step return bootstrapped from
    V(x_T), E[-(R_t - V(x_t)) log pi(a_t|x_t)] + c1 E[0.5 (R_t - V(x_t))^2] - c2 E[H(pi(.|x_t))]."""
    R = n_step_returns(r, V_T, gamma)
    real = mask != 0
    if not real.any():
        return 0.0
    policy = np.mean(-(R - V)[real] * pi_logp[real])
    value = np.mean(0.5 * (R - V)[real] ** 2)
    return policy + value_coef * value - entropy_coef * np.mean(H[real])
