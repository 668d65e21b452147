"""The cost model of the `model` strategy: a Gaussian process over a space's knob values, in numpy.

A point is each knob's position in its value list. Two points' covariance falls with the knobs they differ
in (a weight per knob: 32 and 48 work-items are different programs on a GPU, not neighbours) and with their
distance along each knob's list (a second weight per knob: 2 and 4 items per thread are closer than 2 and
16); a knob of whole numbers, some powers of two and some not, adds a third distance, 0 between two powers
of two (a block width of 48 runs 25-110x slower than 32 or 64 on the hub's AMD convolutions). The weights
are fitted to the points measured so far by the marginal likelihood, a knob at a time over a short grid. The
GP models the log of a point's time; a second GP over 0/1 labels estimates where points fail (build, launch,
wrong answer), so that proposals steer clear of their likes.

Chosen over optuna's samplers, scikit-learn or xgboost because a GP's uncertainty is what expected
improvement needs, a few hundred observations fit in milliseconds without a new dependency, and on the
recorded hub spaces it beat tree ensembles (benchmarks/search_efficiency.py, docs/tuning.md).
"""
from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

GRID = (0.0, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)  # each knob's weights are chosen from these
NOISE = 1e-2  # of the standardized log time: repeat measurements differ by about a percent
_NORMAL = NormalDist()


class Encoding:
    """The points of a listed space as value positions (n x d), one-hot rows, and `ordinal`: list
    positions scaled to [0, 1], then a 0/1 power-of-two column for each knob listed in `twos`, in that
    order. Knobs with one value are left out. `neighbours(i)`: the points that differ from i in one knob."""

    def __init__(self, params, points: list[dict]):
        knobs = [(name, list(values)) for name, values in params if len(values) > 1]
        self.names = [n for n, _ in knobs]
        self.dims = len(self.names)
        self.card = np.array([len(v) for _, v in knobs], dtype=int)
        where = [{_hashable(v): i for i, v in enumerate(values)} for _, values in knobs]
        self.index = np.array([[where[j][_hashable(p[n])] for j, n in enumerate(self.names)] for p in points],
                              dtype=int).reshape(len(points), len(knobs))
        n, d = self.index.shape
        self.offsets = np.concatenate(([0], np.cumsum(self.card)[:-1])).astype(int)
        self.onehot = np.zeros((n, int(self.card.sum())))
        for j in range(d):
            self.onehot[np.arange(n), self.offsets[j] + self.index[:, j]] = 1.0
        flags = [_powers_of_two(values) for _, values in knobs]
        self.twos = [j for j, f in enumerate(flags) if f is not None]
        self.ordinal = np.column_stack([self.index / np.maximum(self.card - 1, 1)]
                                       + [flags[j][self.index[:, j]] for j in self.twos])
        self._rows = {tuple(r): i for i, r in enumerate(self.index.tolist())}

    def neighbours(self, i: int) -> list[int]:
        row, out = self.index[i].tolist(), []
        for j, c in enumerate(self.card):
            keep = row[j]
            for v in [x for x in range(c) if x != keep]:
                row[j] = v
                k = self._rows.get(tuple(row))
                if k is not None:
                    out.append(k)
            row[j] = keep
        return out


def _powers_of_two(values) -> np.ndarray | None:
    """1.0 for each value that is a power of two, 0.0 for the others; None unless the values are
    positive ints of both kinds."""
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in values):
        return None
    flags = np.array([float(x & (x - 1) == 0) for x in values])
    return flags if 0 < flags.sum() < len(flags) else None


def _hashable(v):
    return tuple(v) if isinstance(v, list) else v


def gram(enc: Encoding, a, b, w, v) -> np.ndarray:
    """exp(-(sum_j w_j [a_j != b_j] + sum_j v_j (pos_a_j - pos_b_j)^2)) between point sets a and b."""
    same = (enc.onehot[a] * np.repeat(w, enc.card)) @ enc.onehot[b].T
    oa, ob = enc.ordinal[a] * np.sqrt(v), enc.ordinal[b] * np.sqrt(v)
    sq = (oa * oa).sum(1)[:, None] + (ob * ob).sum(1)[None, :] - 2.0 * oa @ ob.T
    return np.exp(-(w.sum() - same + np.maximum(sq, 0.0)))


class Columns:
    """Covariances of every point of an Encoding with the measured ones, for one weight pair, each measured point's
    column computed once: a proposal scores thousands of candidates by reading rows (9 s of a 200-point replay)."""

    def __init__(self, enc: Encoding, w, v):
        self.enc, self.w, self.v, self.cols, self.every = enc, w, v, {}, np.arange(len(enc.index))

    def of(self, idx) -> np.ndarray:
        new = [i for i in dict.fromkeys(int(i) for i in idx) if i not in self.cols]
        if new:
            block = gram(self.enc, self.every, new, self.w, self.v)
            self.cols.update((i, block[:, k]) for k, i in enumerate(new))
        return np.stack([self.cols[int(i)] for i in idx], axis=1)


class GP:
    """A zero-mean GP over standardized observations y at points idx (covariances from `cols` if given)."""

    def __init__(self, enc: Encoding, idx, y, w, v, cols: Columns | None = None):
        self.enc, self.idx, self.w, self.v = enc, np.asarray(idx), w, v
        self.cross = cols.of(self.idx) if cols is not None else None
        k = (self.cross[self.idx] if cols is not None else gram(enc, self.idx, self.idx, w, v)) \
            + NOISE * np.eye(len(self.idx))
        self.linv = np.linalg.inv(np.linalg.cholesky(k))
        self.alpha = self.linv.T @ (self.linv @ y)

    def predict(self, cand) -> tuple[np.ndarray, np.ndarray]:
        ks = self.cross[cand] if self.cross is not None else gram(self.enc, cand, self.idx, self.w, self.v)
        s = ks @ self.linv.T
        return ks @ self.alpha, np.sqrt(np.maximum(1.0 + NOISE - (s * s).sum(1), 1e-12))


CAP = 0.5  # log times above this quantile of those measured are modelled as that quantile
COPULA_UNTIL = 45  # below this many measured points the GP fits the normal scores of their ranks


def standardized_log(times) -> np.ndarray:
    """What the time GP fits, standardized. From COPULA_UNTIL points on: the log times, those slower than
    the median cut to it. How much slower a slow point is says little about where the fastest are, and its
    large values would dominate the fit: with the cut, the weights follow the knobs that separate fast
    points from the rest (hub conv spaces, 20 seeds: A100 0.93 -> 1.00 at 100 points). Before: the normal
    scores of the times' ranks (a Gaussian copula, as HEBO warps its outputs), which keep the order among
    the slow points too (40 seeds: A100 0.745 -> 0.771 at 50 points; docs/tuning.md)."""
    y = np.log(np.asarray(times, dtype=float))
    if len(y) < COPULA_UNTIL:
        ranks = np.argsort(np.argsort(y, kind="stable"), kind="stable")
        y = np.array([_NORMAL.inv_cdf((r + 0.5) / len(y)) for r in ranks])
    else:
        y = np.minimum(y, np.quantile(y, CAP))
    return (y - y.mean()) / (y.std() + 1e-9)


def failure_share(enc: Encoding, ok, bad, cand, w, v, cols: Columns | None = None) -> np.ndarray:
    """Each candidate's chance of failing: a GP's mean over the measured 0/1 labels, clipped to [0, 1]."""
    labels = np.r_[np.zeros(len(ok)), np.ones(len(bad))]  # 1: failed
    mu, _ = GP(enc, list(ok) + list(bad), labels - labels.mean(), w, v, cols).predict(cand)
    return np.clip(mu + labels.mean(), 0.0, 1.0)


def initial_weights(enc: Encoding) -> tuple:
    """(w, v) of the time GP and (wf, vf) of the failure GP before any fit: w a weight per knob, v one
    per column of `enc.ordinal`."""
    w, v = np.full(enc.dims, 0.3), np.full(enc.ordinal.shape[1], 0.3)
    return w, v, w, v


def refit(enc: Encoding, ok, bad, y, weights) -> tuple:
    """Both GPs' weights fitted again: the time GP's to y at ok, the failure GP's to the labels."""
    w, v, wf, vf = weights
    w, v = fit_weights(enc, ok, y, w, v)
    if bad:
        labels = np.r_[np.zeros(len(ok)), np.ones(len(bad))]
        wf, vf = fit_weights(enc, list(ok) + list(bad), labels - labels.mean(), wf, vf)
    return w, v, wf, vf


def neg_log_likelihood(enc: Encoding, idx, y, w, v) -> float:
    k = gram(enc, idx, idx, w, v) + NOISE * np.eye(len(idx))
    try:
        low = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return math.inf
    z = np.linalg.solve(low, y)
    return 0.5 * float(z @ z) + float(np.log(np.diag(low)).sum())


def fit_weights(enc: Encoding, idx, y, w, v):
    """One pass of coordinate search over GRID for each knob's weights, from (w, v): the v of its
    power-of-two column if it has one (first: where powers of two are what matters, the fit keeps w
    low and what was learned of one power of two carries to the others), its w, its position's v."""
    best = neg_log_likelihood(enc, idx, y, w, v)
    extra = {j: enc.dims + k for k, j in enumerate(enc.twos)}
    for j in range(enc.dims):
        for which, col in ([(1, extra[j])] if j in extra else []) + [(0, j), (1, j)]:
            for g in GRID:
                w2, v2 = w.copy(), v.copy()
                (w2 if which == 0 else v2)[col] = g
                score = neg_log_likelihood(enc, idx, y, w2, v2)
                if score < best:
                    best, w, v = score, w2, v2
    return w, v


def expected_improvement(mu, sd, best) -> np.ndarray:
    z = (best - mu) / sd
    cdf = 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return (best - mu) * cdf + sd * pdf


def _erf(x):
    """Abramowitz and Stegun 7.1.26 (error under 1.5e-7): numpy has no erf."""
    s, x = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * x)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return s * (1.0 - poly * np.exp(-x * x))


def propose(enc, ok, bad, y, weights, near, left, rng, limit, width, cols=(None, None), far=None) -> list[int]:
    """The `width` candidates of highest expected improvement, discounted by their chance of failing (a
    likely failure scores below every other point). The candidates: `near` (the best one's neighbours)
    unless all of them look like failures, else the unmeasured points in `left` (a random `limit` of them;
    of those, the ones that differ from point `far` in half the knobs or more, if any). `cols`: Columns."""
    w, v, wf, vf = weights
    for local, cand in ((True, near), (False, left)):
        if not cand:
            continue
        if len(cand) > limit:
            cand = rng.sample(cand, limit)
        if not local and far is not None:
            cand = np.asarray(cand)[2 * (enc.index[cand] != enc.index[far]).sum(axis=1) >= enc.dims].tolist() or cand
        cand_a = np.array(cand)
        fail = failure_share(enc, ok, bad, cand_a, wf, vf, cols[1]) if bad else np.zeros(len(cand))
        if local and (fail >= 0.5).all():
            continue
        mu, sd = GP(enc, ok, y, w, v, cols[0]).predict(cand_a)
        score = expected_improvement(mu, sd, y.min())
        score = np.where(fail < 0.5, score * (1.0 - fail), -1.0 + (1.0 - fail))
        return [cand[int(k)] for k in np.argsort(-score, kind="stable")[:width]]
    return []


def stalled(times: list) -> bool:
    """Has the best of `times` (measured order, None: failed) gained under STALL[1] in its last STALL[0]?
    A plateau climbed in steps of 1% is as stalled as one with no step at all."""
    n, gain = STALL
    ok = [t for t in times[:-n] if t is not None] if len(times) >= MODEL_INIT + n else []
    return bool(ok) and min(t for t in times if t is not None) > min(ok) * (1.0 - gain)


def flipped(enc: Encoding, ok: list, cost: dict, best: int, turn: int) -> int:
    """The fastest of `ok` whose value of a two-valued knob (the `turn`th, cyclically) is not the best's, else
    best. On the hub's hard convolution files the optimum's `use_padding` (all four) and `use_shmem` (three) are
    the halves whose points have the lower median (A6000, `use_shmem` 0: 0.24 of the optimum against 0.38)."""
    two = [j for j in range(enc.dims) if enc.card[j] == 2]
    j = two[turn % len(two)] if two else None
    other = [i for i in ok if j is not None and enc.index[i, j] != enc.index[best, j]]
    return min(other, key=cost.get) if other else best


MODEL_INIT = 10  # points measured (any way) before the model proposes
STALL = (12, 0.02)  # a search stalled by this (stalled()) proposes far from its best (docs/tuning.md)
FLIP = 4  # once stalled(), every FLIP-th proposal is a local step around a flipped() centre
MODEL_REFIT = 8  # observations between refits of the knob weights
MODEL_POOL = 4096  # candidates scored at a time: of more, a fresh random draw


class Proposer:
    """The `model` strategy's decisions for a caller that owns the loop (the strategy, or a network task pulling
    one point at a time): told the costs so far (Encoding index -> cost, None: failed, in measured order) and the
    unmeasured indices, it proposes the next `width`, or None while too few are measured (the caller takes its
    own). Every other proposal is among the best point's one-knob neighbours (once stalled(), every other of those
    among a flipped() centre's); the others, once stalled(), among points far from the best."""

    def __init__(self, enc: Encoding, rng):
        self.rng, self.weights, self.fitted_at, self.step = rng, initial_weights(enc), -1, 0
        self.cols = (Columns(enc, *self.weights[:2]), Columns(enc, *self.weights[2:]))

    def propose(self, enc: Encoding, cost: dict, left: list, width: int = 1, taken=()) -> list | None:
        """`taken`: points proposed already and not yet measured (left out of the neighbours)."""
        ok = [i for i, c in cost.items() if c is not None]
        if len(ok) < 2 or len(cost) < MODEL_INIT or enc.dims == 0:
            return None
        self.step += 1
        bad = [i for i, c in cost.items() if c is None]
        y = standardized_log([cost[i] for i in ok])
        if self.fitted_at < 0 or len(cost) - self.fitted_at >= MODEL_REFIT or self.cols[0].enc is not enc:
            self.weights, self.fitted_at = refit(enc, ok, bad, y, self.weights), len(cost)
            w, v, wf, vf = self.weights
            self.cols = (Columns(enc, w, v), Columns(enc, wf, vf))
        best, stuck = ok[int(y.argmin())], stalled(list(cost.values()))
        centre = flipped(enc, ok, cost, best, self.step // FLIP) if stuck and self.step % FLIP == 0 else best
        near = [k for k in enc.neighbours(centre) if k not in cost and k not in taken] if self.step % 2 == 0 else []
        far = best if self.step % 2 == 1 and stuck else None
        return propose(enc, ok, bad, y, self.weights, near, left, self.rng, MODEL_POOL, width, self.cols, far)

    def peek(self, enc: Encoding, cost: dict, left: list, taken) -> list:
        """What the next call would propose if `taken` (proposed, not yet measured) changed nothing: a
        guess to build ahead. The Proposer is left as it was: the proposals are the same without a peek."""
        state, step = self.rng.getstate(), self.step
        try:
            return self.propose(enc, cost, left, 1, taken) or []
        finally:
            self.rng.setstate(state)
            self.step = step


def mixed_encoding(points: list[dict]) -> Encoding:
    """An Encoding of points from several spaces or families, value lists read off the points
    themselves (numbers ascending; a knob a point lacks gets a value of its own)."""
    names = sorted({n for p in points for n in p})
    full = [{n: _hashable(p.get(n, "<missing>")) for n in names} for p in points]
    order = lambda v: (0, v, "") if isinstance(v, (int, float)) else (1, 0, repr(v))  # noqa: E731
    return Encoding([(n, sorted({p[n] for p in full}, key=order)) for n in names], full)
