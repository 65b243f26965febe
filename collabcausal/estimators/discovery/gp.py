"""Gaussian-process regression with marginal-likelihood hyperparameters (Mooij et al. 2016, section 4.1).

The reference implementation of ANM-HSIC (Mooij, Peters, Janzing, Zscheischler and Schölkopf,
"Distinguishing cause from effect using observational data: methods and benchmarks", JMLR 17, 2016)
regresses each variable on the other with a GP whose squared-exponential kernel (signal variance,
length scale) and Gaussian noise variance maximise the marginal likelihood. Here: scikit-learn's
:class:`~sklearn.gaussian_process.GaussianProcessRegressor` with ``C * RBF + White`` on the scaled
[-1, 1] inputs, targets normalised, L-BFGS-B from a fixed start (no random restarts: deterministic).

The hyperparameters are chosen on the training rows: a release that protects them must not use
this regression (:meth:`AdditiveNoiseModel.data_tuned`); the private releases use the kernel ridge
regression of paper 002 with public parameters, whose sensitivity is known (Theorem 5).
"""

from __future__ import annotations

import warnings

import numpy as np
from numpy.typing import NDArray
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

from collabcausal.estimators.validation import check_vector

LENGTH_SCALE_BOUNDS = (1e-2, 1e2)
NOISE_BOUNDS = (1e-6, 1e1)


def fit_gp(x: NDArray[np.float64], y: NDArray[np.float64]) -> GaussianProcessRegressor:
    """A GP regression of ``y`` on ``x`` (1-D) with marginal-likelihood hyperparameters.

    Start: signal variance 1, length scale 0.3 (the fixed KRR bandwidth), noise variance 0.1, all on
    the normalised target. Bounds keep the optimiser away from degenerate kernels: length scale in
    [0.01, 100] on the [-1, 1] scale, noise variance in [1e-6, 10]; a hyperparameter ending on a
    bound is kept (scikit-learn's ConvergenceWarning is silenced: it is an expected outcome, e.g.
    the noise floor on a noiseless pair).
    """
    x_arr = check_vector(x, "x")
    y_arr = check_vector(y, "y", n=x_arr.size)
    kernel = ConstantKernel(1.0, (1e-3, 1e3)) * RBF(0.3, LENGTH_SCALE_BOUNDS) + WhiteKernel(0.1, NOISE_BOUNDS)
    model = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(x_arr[:, None], y_arr)


def fitted_params(model: GaussianProcessRegressor) -> tuple[float, float]:
    """A fitted :func:`fit_gp` model's ``(length scale, noise variance)`` (noise on the normalised target)."""
    params = model.kernel_.get_params()
    return float(params["k1__k2__length_scale"]), float(params["k2__noise_level"])

