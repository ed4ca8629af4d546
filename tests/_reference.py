"""Literal float64 evaluations of the measures' definitions (n×n matrices), for tests only."""

import numpy as np
from scipy.linalg import orthogonal_procrustes
from scipy.spatial.distance import cosine


def left_basis(x):
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    return u[:, s > s[0] * max(x.shape) * np.finfo(float).eps]


def eis(x, y, ex, ey, alpha=3):
    u, v = left_basis(x), left_basis(y)
    p, q = u @ u.T, v @ v.T
    sigma = gram_power(ex, alpha) + gram_power(ey, alpha)
    diff = p - q
    return np.trace(diff @ sigma @ diff) / np.trace(sigma)


def gram_power(e, alpha):
    """(E Eᵀ)^α = V R^{2α} Vᵀ over E's nonzero singular values (spec §2.1); α = 0 gives the projection."""
    if alpha >= 1 and float(alpha).is_integer():
        return np.linalg.matrix_power(e @ e.T, int(alpha))
    v, r, _ = np.linalg.svd(e, full_matrices=False)
    keep = r > r[0] * max(e.shape) * np.finfo(float).eps
    return (v[:, keep] * r[keep] ** (2 * alpha)) @ v[:, keep].T


def knn(x, y, k, queries):
    def neighbours(m, q):
        norms = np.linalg.norm(m, axis=1)
        sim = (m @ m[q]) / (norms * norms[q])
        order = np.argsort(-sim, kind="stable")[: k + 1].tolist()
        if q in order:
            order.remove(q)
        else:
            order = order[:k]
        return set(order)

    return float(np.mean([len(neighbours(x, q) & neighbours(y, q)) / k for q in queries]))


def semantic_displacement(x, y):
    omega, _ = orthogonal_procrustes(x, y)
    xr = x @ omega
    return float(np.nanmean([cosine(a, b) for a, b in zip(xr, y)]))


def pip_loss(x, y):
    return np.linalg.norm(x @ x.T - y @ y.T)


def eigenspace_overlap(x, y):
    u, v = left_basis(x), left_basis(y)
    return np.linalg.norm(u.T @ v) ** 2 / max(u.shape[1], v.shape[1])


def weighted_eigenspace_overlap(x, y, e=1.0):
    u = left_basis(x)
    v, s, _ = np.linalg.svd(y, full_matrices=False)
    return np.linalg.norm(u.T @ v @ np.diag(s ** e)) ** 2 / np.sum(s ** (2 * e))


def linear_cka(x, y):
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n
    k, l = h @ x @ x.T @ h, h @ y @ y.T @ h
    return np.trace(k @ l) / np.sqrt(np.trace(k @ k) * np.trace(l @ l))


def procrustes_distance(x, y):
    xc, yc = x - x.mean(0), y - y.mean(0)
    xc, yc = xc / np.linalg.norm(xc), yc / np.linalg.norm(yc)
    omega, _ = orthogonal_procrustes(xc, yc)
    return np.linalg.norm(xc @ omega - yc)
