"""Docstring pieces shared by the estimators (numpydoc)."""

PARAMETERS = """\
    kernel : str or callable, default={kernel_default}
        A registered kernel name (``"linear"``, ``"polynomial"``/``"poly"``,
        ``"rbf"``/``"gaussian"``, ``"exponential"``, ``"laplacian"``,
        ``"sigmoid"``, ``"all_subsets"``, or one added with
        :func:`kernelgd.register_kernel`), ``"precomputed"`` (X is then the
        kernel matrix), a callable ``f(X, Y, **kernel_params)`` returning
        the ``(len(X), len(Y))`` block, or ``"auto"``: with the squared loss,
        the smooth rbf or the rough laplacian kernel, whichever ``alpha``'s
        rule scores better on the data (a classifier: by its left-out error
        rate, beyond chance); with the logistic loss, the rbf. See
        :ref:`ug-default-ridge`. The kernel used is ``kernel_``.
    sigma : float, array-like of shape (n_features,) or "scale", default="scale"
        Bandwidth of the rbf, exponential and laplacian kernels, and the
        polynomial kernel's scale (``x'z / sigma**2``: ``1 / sigma**2`` is
        SVC's ``gamma``). ``"scale"`` sets ``sigma**2`` to the sum of the
        features' variances, each about its own mean (weighted by
        sample_weight): half the mean squared distance between two rows,
        unchanged by a shift of any feature; on centred features
        ``n_features * X.var()``, SVC's ``gamma="scale"`` (the user guide's
        kernel table gives the
        exponential and polynomial kernels' forms); the defaults then try
        nearby widths where the data prefer them: a regressor's
        ``kernel="auto"`` wider ones on up to 1,000 distinct rows
        (:ref:`ug-default-ridge`), a classifier narrower ones, and with
        the logistic loss wider ones too (:ref:`ug-classification`). An
        array gives each feature its own scale (feature j is divided by
        ``sigma[j]``, by ``sigma[j]**2`` for exponential), as a Gaussian
        process's anisotropic RBF. The width used is ``sigma_``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Further keyword arguments of the kernel function (``a`` of the
        sigmoid kernel, parameters of a registered or callable kernel).
{alpha}    solver : {"auto", "gd", "cg", "eigenpro", "newton"}, default="auto"
        ``"gd"``: plain gradient descent on the dual coefficients (see
        Notes). ``"cg"``: preconditioned conjugate gradient on the ridge
        system. ``"eigenpro"``: gradient descent preconditioned by the top
        eigen-directions of a subsample (EigenPro), stochastic without
        ridge. ``"newton"``: damped Newton steps whose weighted ridge
        systems ``"cg"`` solves (for the logistic loss). ``"auto"``:
        ``"cg"`` when ``alpha > 0`` or ``n_centers`` is set, ``"eigenpro"``
        without ridge, ``"gd"`` for kernels that are not positive
        semi-definite; ``"newton"`` with the logistic loss. All minimise the same
        objective; the one used is ``solver_``.
    step_size : float or "auto", default="auto"
        Step of solver ``"gd"``. ``"auto"`` takes 0.9 times the stable bound
        ``1 / (lambda_max + alpha)``, with ``lambda_max`` the largest
        eigenvalue of the weighted kernel matrix (estimated
        deterministically by Lanczos). A float above the bound makes the
        fit raise a ValueError that states the bound.
    max_iter : int, default=1000
        Maximum number of iterations: updates for ``"gd"`` and ``"cg"``,
        epochs for ``"eigenpro"``, Newton steps for ``"newton"`` (each
        also runs at most ``max_iter`` conjugate-gradient iterations).
    tol : float or "auto", default="auto"
        Stopping tolerance. ``"gd"`` and ``"eigenpro"`` stop when the norm of
        the primal gradient is at most ``tol`` times its value at the
        intercept-only model; ``"cg"`` when the relative residual of the
        linear system is at most ``tol``; ``"newton"`` when the decrease its
        Newton step predicts is at most ``tol**2`` times the intercept-only
        model's objective. Stopping at ``max_iter`` or for
        lack of progress warns. ``tol=0`` runs exactly ``max_iter``
        iterations. ``"auto"``: where ``alpha="auto"`` chose the ridge of the
        squared loss's exact model, which ``"cg"`` solves, a fiftieth of the
        error the rule measured there (its leave-one-out or GCV root mean
        squared error over the spread of y, at most 1): the solve's error in
        the fitted values, at most ``tol`` times that spread, then stays far
        below the model's own (a noisy target stops sooner, a nearly
        noiseless one later); otherwise 1e-3. The value used is ``tol_``.
    n_centers : int, "auto" or None, default="auto"
        Restrict f to ``n_centers`` distinct training rows drawn at random
        (the Nystroem / FALKON model): memory O(n * n_centers) instead of
        O(n^2), at some loss of accuracy for small ``n_centers``. None uses
        every training row (the exact model). ``"auto"``: the exact model
        up to 20,000 rows of positive weight, and beyond wherever the
        kernel matrix in float32 fits ``options["memory_budget"]`` (the
        squared loss); otherwise ``max(4000, 2 sqrt(n))`` centers for the
        squared loss and ``max(1000, 2 sqrt(n))`` for the logistic loss
        (:ref:`ug-centers`). The count used is ``n_centers_``.
    fit_intercept : bool, default=True
        Whether to learn an unpenalised intercept.
    early_stopping : bool, default=False
        Hold out ``validation_fraction`` of the training data, stop when its
        loss has not improved by ``tol`` (relative) for
        ``n_iter_no_change`` iterations, and keep the best iterate.
    validation_fraction : float, default=0.1
        Share of the training data held out for early stopping.
    n_iter_no_change : int, default=5
        Patience of early stopping, in iterations.
    warm_start : bool, default=False
        Start from the previous ``dual_coef_`` and ``intercept_`` when the
        new fit has as many coefficients and targets as the last one (every
        solver). With centers, a warm start on the same inputs keeps the
        last fit's centers (other inputs get centers drawn anew).
    random_state : int, RandomState instance or None, default=None
        Seeds the random choices: landmarks and centers, EigenPro's
        subsample and batches, the early-stopping split.
    options : dict, default=None
        Performance settings, apart from the statistical ones
        (:ref:`ug-options`): ``"memory_budget"`` (bytes, or ``"auto"``: half
        the memory available at fit time, or three quarters of a CUDA
        device's free memory) bounds the kernel matrix kept in memory (else it is
        recomputed in row blocks); ``"dtype"`` (``"auto"``, ``"float32"``,
        ``"float64"``) is the precision of stored kernel values (``"auto"``:
        float64 up to 4,096 distinct rows of positive weight and with
        ``n_centers``, float32 above; predictions on the CPU are float64);
        ``"n_threads"`` (``"auto"``: every
        core this process may use, or an integer) evaluates kernel blocks.
        BLAS runs on one thread during ``fit`` and ``predict``: idle
        multithreaded OpenBLAS threads spin and slow fits on a busy machine.
    verbose : int, default=0
        ``1`` prints progress lines every so often (iteration, objective,
        step); ``2`` every iteration."""

NOTES = """\
    The estimator minimises

    .. math:: L = \\sum_i w_i (f(x_i) - y_i)^2 + \\alpha \\|f\\|_H^2,
              \\quad f(x) = \\sum_j a_j k(x_j, x) + b,

    with the sample weights ``w`` normalised to sum to one (``1/n`` without
    weights) and ``||f||_H^2 = a'Ka``. Solver ``"gd"`` starts from
    ``a = 0`` and the best constant b (the weighted mean of y) and repeats

    .. math:: a_i \\leftarrow a_i - \\eta \\, (2 w_i (f(x_i) - y_i) + 2 \\alpha a_i),
              \\qquad b \\leftarrow b - \\eta \\sum_i 2 w_i (f(x_i) - y_i),

    which is exactly gradient descent on the primal weights
    ``beta = sum_i a_i phi(x_i)``. Each update costs one product ``K @ a``;
    K is stored when it fits in the memory budget and recomputed in row
    blocks otherwise."""


REGRESSOR_ALPHA = """\
    alpha : float or "auto", default="auto"
        Ridge strength (>= 0) in the objective below, per sample: it equals
        scikit-learn's ``KernelRidge(alpha=n_samples * alpha)``. ``"auto"``
        chooses it from the data at about the cost of one fit: the ridge of
        least exact leave-one-out error up to 1,000 distinct rows; beyond,
        of least generalized cross-validation error of a Nystroem model on
        500 landmarks (kept from interpolating the rows it misses by exact
        leave-one-out on a random subsample), never below 1e-6 times the
        mean ``k(x, x)``; the same landmarks then precondition the solve.
        Repeated rows count once and sample weights are relative
        (:ref:`ug-default-ridge`). The value used is ``alpha_``. For a
        kernel that is not positive semi-definite, ``"auto"`` is 0. With
        ``alpha=0`` the minimiser interpolates the training data, and only
        stopping early (``tol``, ``max_iter``, ``early_stopping``)
        regularises; near 0 with centers, see :ref:`ug-stopping`.
"""

CLASSIFIER_ALPHA = """\
    alpha : float or "auto", default="auto"
        Ridge strength (>= 0) in the objective below, as in
        :class:`KernelGDRegressor`. ``"auto"``, with the squared loss: the
        regressor's rule on the +-1 codes of the classes, or another ridge
        where its left-out error rate is lower by two standard errors
        (:ref:`ug-default-ridge`). With the logistic loss: that rule scaled
        by the loss's curvature at the intercept-only model, then moved by
        the log-loss of rows left out (approximate leave-one-out paths on
        small problems or subsamples, held-out folds of the whole set),
        which may also narrow ``sigma="scale"``'s width
        (:ref:`ug-classification`). It is positive, so a minimiser exists
        even on separable data. The value used is ``alpha_``. On many
        classes the logistic default's smaller ridge costs Newton steps:
        letter (16,000 rows, 26 classes) takes about a minute, where
        ``alpha=1 / (2 * n_samples)`` (``C=1``) is several times faster and
        underfits (the user guide's figures).
"""
