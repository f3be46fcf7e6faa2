"""Slow NumPy references for the replay-based losses, in the papers' notation, one plain loop per sum.

Like losses_reference, they are written differently from the torch code: the n-step return is the explicit
sum of Ape-X / Sutton & Barto (not a running product), an item's window is walked step by step with the
cases spelled out, the argmax is a loop, Huber is the piecewise definition, h^-1 is the closed form as
printed in Pohlen et al. 2018, and tanh's Jacobian is the direct log(1 - tanh(u)^2). gamma_j is the per-step
discount gamma * (1 - done_j), so gamma^k becomes gamma_0 ... gamma_{k-1}.
"""

from __future__ import annotations

import math

import numpy as np

from losses_reference import product


def n_step_return(r, gamma, V_bootstrap):
    """G = sum_{k=0}^{n-1} (prod_{j=0}^{k-1} gamma_j) r_k + (prod_{j=0}^{n-1} gamma_j) V(s_n), per row b."""
    B, n = r.shape
    G = np.zeros(B)
    for b in range(B):
        G[b] = sum(product(gamma[b, :k]) * r[b, k] for k in range(n)) + product(gamma[b, :n]) * V_bootstrap[b]
    return G


def n_step_items(obs, actions, r, gamma, valid, n):
    """Ape-X's items from an unroll: for each real step t (time-major order), walk the window t, t+1, ...:
    stop before the unroll's end or an invalid step, keep the step, stop after it if its episode ended or n
    steps are in. Returns a list of dicts (obs, action, R, D, next_obs, m, t, b)."""
    T, B = r.shape
    items = []
    for t in range(T):
        for b in range(B):
            if not valid[t, b]:
                continue
            R, D, m = 0.0, 1.0, 0
            while m < n and t + m < T and valid[t + m, b]:
                R += D * r[t + m, b]
                D *= gamma[t + m, b]
                m += 1
                if gamma[t + m - 1, b] == 0:  # the episode ended at step t + m - 1
                    break
            items.append(dict(obs=obs[t, b], action=actions[t, b], R=R, D=D, next_obs=obs[t + m, b], m=m, t=t, b=b))
    return items


def argmax(row):
    """The first index of the largest entry."""
    best = 0
    for a in range(1, len(row)):
        if row[a] > row[best]:
            best = a
    return best


def h(x, eps):
    """Pohlen et al. 2018: h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return np.sign(x) * (np.sqrt(np.abs(x) + 1.0) - 1.0) + eps * x


def h_inverse(x, eps):
    """Pohlen et al. 2018, appendix A: sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1);
    for eps = 0, h is sign(x)(sqrt(|x| + 1) - 1), whose inverse is sign(x)((|x| + 1)^2 - 1)."""
    if eps == 0:
        return np.sign(x) * ((np.abs(x) + 1.0) ** 2 - 1.0)
    return np.sign(x) * (((np.sqrt(1.0 + 4.0 * eps * (np.abs(x) + 1.0 + eps)) - 1.0) / (2.0 * eps)) ** 2 - 1.0)


def q_learning_targets(Q_target_next, R, D, eps=None):
    """Mnih et al. 2015: y = R + D max_a Q_target(s', a); with eps, y = h(R + D h^-1(max_a Q_target(s', a)))."""
    B = len(R)
    y = np.zeros(B)
    for b in range(B):
        bootstrap = Q_target_next[b, argmax(Q_target_next[b])]
        y[b] = R[b] + D[b] * (bootstrap if eps is None else h_inverse(bootstrap, eps))
    return y if eps is None else h(y, eps)


def double_q_targets(Q_online_next, Q_target_next, R, D, eps=None):
    """van Hasselt et al. 2016: y = R + D Q_target(s', argmax_a Q_online(s', a)) (R2D2's h as above)."""
    B = len(R)
    y = np.zeros(B)
    for b in range(B):
        bootstrap = Q_target_next[b, argmax(Q_online_next[b])]
        y[b] = R[b] + D[b] * (bootstrap if eps is None else h_inverse(bootstrap, eps))
    return y if eps is None else h(y, eps)


def dueling(V, A):
    """Wang et al. 2016, eq. 9: Q(s, a) = V(s) + (A(s, a) - (1/|A|) sum_a' A(s, a'))."""
    B, n_actions = A.shape
    Q = np.zeros((B, n_actions))
    for b in range(B):
        mean_advantage = sum(A[b]) / n_actions
        for a in range(n_actions):
            Q[b, a] = V[b, 0] + A[b, a] - mean_advantage
    return Q


def huber(delta, kappa):
    """Huber 1964: 0.5 delta^2 if |delta| <= kappa, else kappa (|delta| - 0.5 kappa)."""
    return 0.5 * delta**2 if abs(delta) <= kappa else kappa * (abs(delta) - 0.5 * kappa)


def dqn_loss(Q, actions, y, w, mask, loss, kappa, priority_eps):
    """Schaul et al. 2016: (1/N) sum_i w_i L(delta_i), delta_i = y_i - Q(s_i, a_i), over the N real items;
    priorities p_i = |delta_i| + eps (0 for items that are not real). Returns (loss, priorities, stats)."""
    B = len(y)
    priorities = np.zeros(B)
    terms, errors, taken, targets = [], [], [], []
    for i in range(B):
        if not mask[i]:
            continue
        delta = y[i] - Q[i, actions[i]]
        terms.append(w[i] * (huber(delta, kappa) if loss == "huber" else 0.5 * delta**2))
        priorities[i] = abs(delta) + priority_eps
        errors.append(abs(delta))
        taken.append(Q[i, actions[i]])
        targets.append(y[i])
    if not terms:
        return 0.0, priorities, dict(q_loss=0.0, td_error=0.0, q_taken=0.0, target=0.0)
    stats = dict(q_loss=np.mean(terms), td_error=np.mean(errors), q_taken=np.mean(taken), target=np.mean(targets))
    return stats["q_loss"], priorities, stats


def sac_critic(Q1, Q2, r, gamma, Q1_target_next, Q2_target_next, logp_next, alpha, w, mask):
    """Haarnoja et al. 2018b, soft Q target with twin target critics:
    y = r + gamma (min_i Q_i_target(s', a') - alpha log pi(a'|s')),
    J_Q = (1/N) sum_real w [0.5 (Q1 - y)^2 + 0.5 (Q2 - y)^2]. Returns (loss, y, stats)."""
    B = len(r)
    y = np.zeros(B)
    terms, q1s, q2s, ys = [], [], [], []
    for i in range(B):
        y[i] = r[i] + gamma[i] * (min(Q1_target_next[i], Q2_target_next[i]) - alpha * logp_next[i])
        if mask[i]:
            terms.append(w[i] * (0.5 * (Q1[i] - y[i]) ** 2 + 0.5 * (Q2[i] - y[i]) ** 2))
            q1s.append(Q1[i])
            q2s.append(Q2[i])
            ys.append(y[i])
    if not terms:
        return 0.0, y, dict(critic_loss=0.0, q1=0.0, q2=0.0, target=0.0)
    stats = dict(critic_loss=np.mean(terms), q1=np.mean(q1s), q2=np.mean(q2s), target=np.mean(ys))
    return stats["critic_loss"], y, stats


def sac_actor(Q1_pi, Q2_pi, logp_pi, alpha, mask):
    """Haarnoja et al. 2018, eq. 12: J_pi = (1/N) sum_real [alpha log pi(a~|s) - min(Q1(s, a~), Q2(s, a~))]."""
    real = [i for i in range(len(logp_pi)) if mask[i]]
    if not real:
        return 0.0, dict(actor_loss=0.0, entropy=0.0, q_pi=0.0)
    terms = [alpha * logp_pi[i] - min(Q1_pi[i], Q2_pi[i]) for i in real]
    stats = dict(
        actor_loss=np.mean(terms),
        entropy=-np.mean([logp_pi[i] for i in real]),
        q_pi=np.mean([min(Q1_pi[i], Q2_pi[i]) for i in real]),
    )
    return stats["actor_loss"], stats


def sac_temperature(log_alpha, logp_pi, target_entropy, mask):
    """Haarnoja et al. 2018b, section 5: J(alpha) = E[-alpha log pi(a|s) - alpha H_bar], alpha = exp(log_alpha)."""
    alpha = math.exp(log_alpha)
    real = [i for i in range(len(logp_pi)) if mask[i]]
    if not real:
        return 0.0, dict(temperature_loss=0.0, alpha=alpha, entropy=0.0)
    loss = np.mean([-alpha * logp_pi[i] - alpha * target_entropy for i in real])
    return loss, dict(temperature_loss=loss, alpha=alpha, entropy=-np.mean([logp_pi[i] for i in real]))


def squashed_gaussian_logp(u, mu, log_sigma, low, high):
    """Haarnoja et al. 2018, appendix C, eq. 21, with a = low + (high - low)(tanh(u) + 1)/2:
    log pi(a|s) = sum_i [log N(u_i; mu_i, sigma_i^2) - log(1 - tanh^2(u_i)) - log((high_i - low_i)/2)].
    The direct form: fine for moderate u, -inf once tanh(u) rounds to 1."""
    B, D = u.shape
    low, high = np.broadcast_to(low, (D,)), np.broadcast_to(high, (D,))
    logp = np.zeros(B)
    for b in range(B):
        for i in range(D):
            sigma = math.exp(log_sigma[b, i])
            log_normal = -((u[b, i] - mu[b, i]) ** 2) / (2 * sigma**2) - math.log(sigma * math.sqrt(2 * math.pi))
            logp[b] += log_normal - math.log(1 - math.tanh(u[b, i]) ** 2) - math.log((high[i] - low[i]) / 2)
    return logp
