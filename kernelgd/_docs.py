"""Docstring pieces shared by the estimators (numpydoc)."""

PARAMETERS = """\
    kernel : str or callable, default="rbf"
        A registered kernel name (``"linear"``, ``"polynomial"``/``"poly"``,
        ``"rbf"``/``"gaussian"``, ``"exponential"``, ``"laplacian"``,
        ``"sigmoid"``, ``"all_subsets"``, or one added with
        :func:`kernelgd.register_kernel`), ``"precomputed"`` (X is then the
        kernel matrix), or a callable ``f(X, Y, **kernel_params)`` returning
        the ``(len(X), len(Y))`` block.
    sigma : float or "scale", default="scale"
        Bandwidth of the rbf, exponential and laplacian kernels. ``"scale"``
        sets ``sigma**2 = n_features * X.var()`` (weighted by sample_weight),
        the analogue of SVC's ``gamma="scale"``; the value used is
        ``sigma_``.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1.0
        Constant of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Further keyword arguments of the kernel function (``a`` of the
        sigmoid kernel, parameters of a registered or callable kernel).
    alpha : float, default=0.0
        Ridge strength (>= 0) in the objective below. ``alpha`` here equals
        scikit-learn's ``KernelRidge(alpha=n_samples * alpha)``.
    step_size : float or "auto", default="auto"
        Gradient-descent step. ``"auto"`` takes 0.9 times the stable bound
        ``1 / (lambda_max + alpha)``, with ``lambda_max`` the largest
        eigenvalue of the weighted kernel matrix (estimated
        deterministically by Lanczos). A float above the bound makes the
        fit raise a ValueError that states the bound.
    max_iter : int, default=1000
        Maximum number of gradient-descent updates.
    tol : float, default=1e-6
        Stop when the objective changes by at most ``tol`` times its value
        in one update. ``tol=0`` runs exactly ``max_iter`` updates.
    solver : {"gd"}, default="gd"
        ``"gd"``: the update of the course notes (see Notes).
    fit_intercept : bool, default=True
        Whether to learn an unpenalised intercept by its own gradient.
    warm_start : bool, default=False
        Start from the previous ``dual_coef_`` and ``intercept_`` when the
        new training set has as many samples and targets as the last one.
    verbose : int, default=0
        ``1`` prints the objective every tenth of ``max_iter``; ``2`` every
        update."""

NOTES = """\
    The estimator minimises

    .. math:: L = \\sum_i w_i (f(x_i) - y_i)^2 + \\alpha \\|f\\|_H^2,
              \\quad f(x) = \\sum_j a_j k(x_j, x) + b,

    with the sample weights ``w`` normalised to sum to one (``1/n`` without
    weights) and ``||f||_H^2 = a'Ka``. Solver ``"gd"`` starts from
    ``a = 0, b = 0`` and repeats

    .. math:: a_i \\leftarrow a_i - \\eta \\, (2 w_i (f(x_i) - y_i) + 2 \\alpha a_i),
              \\qquad b \\leftarrow b - \\eta \\sum_i 2 w_i (f(x_i) - y_i),

    which is exactly gradient descent on the primal weights
    ``beta = sum_i a_i phi(x_i)``. Each update costs one product ``K @ a``;
    K is stored when it fits in 1 GiB and recomputed in row blocks
    otherwise."""
