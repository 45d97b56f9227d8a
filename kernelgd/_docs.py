"""Docstring pieces shared by the estimators (numpydoc)."""

PARAMETERS = """\
    kernel : str or callable, default={kernel_default}
        A registered kernel name (``"linear"``, ``"polynomial"``/``"poly"``,
        ``"rbf"``/``"gaussian"``, ``"exponential"``, ``"laplacian"``,
        ``"sigmoid"``, ``"all_subsets"``, or one added with
        :func:`kernelgd.register_kernel`), ``"precomputed"`` (X is then the
        kernel matrix), a callable ``f(X, Y, **kernel_params)`` returning
        the ``(len(X), len(Y))`` block, or ``"auto"``: with the squared
        loss, the smooth rbf or the rough laplacian kernel, whichever has
        the smaller error by the rule of ``alpha`` below (the exact model's
        leave-one-out error up to 1,000 distinct rows, else the
        generalized cross-validation error of a 500-landmark Nystroem
        model), each at its own ``sigma="scale"`` width and, with
        ``alpha="auto"``, at its own best ridge; a classifier takes the
        other kernel instead where its rows' left-out error rate at its
        ridge is lower by two standard errors of the paired difference. Up
        to 1,000 distinct rows, with ``sigma="scale"`` and the exact model
        (no centers), a regressor's kernel kept is then tried at 2 and at 4
        times its width, the second only if the first lowered the
        leave-one-out error, and the width of least error is kept
        (``sigma_``); a classifier's, at 1/2 and 1/4 of it (see ``sigma``).
        With the logistic
        loss, the rbf. The kernel used is ``kernel_``.
    sigma : float, array-like of shape (n_features,) or "scale", default="scale"
        Bandwidth of the rbf, exponential and laplacian kernels, and the
        polynomial kernel's scale (``x'z / sigma**2``: ``1 / sigma**2`` is
        SVC's ``gamma``). ``"scale"``
        sets ``sigma**2 = n_features * X.var()`` (weighted by sample_weight),
        the analogue of SVC's ``gamma="scale"`` (for exponential, which
        divides distances by ``sigma**2``, ``sigma**4``; for polynomial,
        X's mean square about 0, ``X.var() + X.mean()**2``, so that
        ``x'x / sigma**2`` is 1 on average: predictions then do not change
        when X is scaled); the value used is ``sigma_`` (``kernel="auto"``
        may widen it on a small set: see ``kernel``; with the squared loss
        and the exact model, a classifier's rbf, laplacian or exponential
        kernel is also tried at 1/2 and then 1/4 of that width, each while
        it lowers the error of ``alpha``'s rule (where that is exact
        leave-one-out, by one standard error of the paired difference)
        without misclassifying more left-out rows, or classifies them
        significantly better, as between kernels); with the logistic loss
        and ``alpha="auto"``, half and a quarter of it where held-out rows
        prefer them (see ``alpha``). An
        array gives each feature its own scale (feature j is divided by
        ``sigma[j]``, by ``sigma[j]**2`` for exponential),
        as for a Gaussian process's anisotropic RBF.
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
    tol : float, default=1e-3
        Stopping tolerance. ``"gd"`` and ``"eigenpro"`` stop when the norm of
        the primal gradient is at most ``tol`` times its value at the
        intercept-only model; ``"cg"`` when the relative residual of the
        linear system is at most ``tol``; ``"newton"`` when the decrease its
        Newton step predicts is at most ``tol**2`` times the intercept-only
        model's objective. Stopping at ``max_iter`` or for
        lack of progress warns. ``tol=0`` runs exactly ``max_iter``
        iterations.
    n_centers : int, "auto" or None, default="auto"
        Restrict f to ``n_centers`` training points drawn at random (the
        Nystroem / FALKON model): memory O(n * n_centers) instead of
        O(n^2), at some loss of accuracy for small ``n_centers``. For dense
        X they are distinct rows: a repeated row would add no basis
        function (fewer where X has fewer distinct rows). None uses
        all training points (the exact model). ``"auto"`` uses all of them
        up to 20,000 training rows with positive weight, and above that
        (the squared loss) wherever the kernel matrix, stored in float32,
        fits in ``options["memory_budget"]`` (on a CUDA device by default
        half its free memory); otherwise
        ``max(4000, 2 sqrt(n))`` centers for the squared loss and
        ``max(1000, 2 sqrt(n))`` for the logistic loss (with the solvers that support
        centers, and not for a precomputed kernel). The count used is
        ``n_centers_``.
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
        Performance settings, apart from the statistical ones:
        ``"memory_budget"`` (bytes, or ``"auto"``, the default: half the
        memory available at fit time, or half the GPU's free memory for
        arrays on a CUDA device) bounds the kernel matrix kept in memory (K is stored when it fits, else streamed in row
        blocks); ``"dtype"`` (``"auto"``, ``"float32"``, ``"float64"``) is
        the precision of kernel values, ``"auto"`` meaning float64 up to
        4096^2 entries and float32 above (products accumulate in float64),
        except float64 always with ``n_centers``, whose preconditioner would
        amplify float32 rounding, and a fit that float32 rounding stops
        short (tiny alpha) is continued in float64; ``"n_threads"`` (``"auto"``, the default:
        every core this process may use, or an integer) is the number of
        threads that evaluate kernel blocks, and on which ``alpha="auto"``
        scores the kernels it compares side by side. BLAS runs on
        one thread during ``fit`` and ``predict`` whatever this setting:
        idle multithreaded OpenBLAS threads spin and slow fits down on a busy
        machine (``benchmarks/bench_threads.py``).
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
        Ridge strength (>= 0) in the objective below. ``alpha`` here equals
        scikit-learn's ``KernelRidge(alpha=n_samples * alpha)``. ``"auto"``
        chooses it from the data at about the cost of one fit: up to 1,000
        distinct rows, the ridge of least exact leave-one-out error (in closed
        form, from the hat matrix's diagonal); beyond, the ridge of least
        generalized cross-validation error of the Nystroem model on 500
        landmarks that randomly pivoted Cholesky draws from the kernel matrix
        (on at most 20,000 rows, in float64), among ridges from a tenth of the
        factor's smallest eigenvalue above rounding (float32's where
        ``options={"dtype": "float32"}``, else float64's) to its largest that
        leave the model at most ``n_samples / 2`` degrees of freedom, none
        below 1e-6 times the mean weighted ``k(x, x)`` over the distinct rows
        of positive weight (the least ridge, where solver "cg" reads the
        system as singular); where GCV's choice leaves 500 random rows out
        with at least twice the error of their exact leave-one-out ridge,
        none below the exact leave-one-out ridge of 1,000 random rows times
        1,000 over the number of distinct rows (GCV misses the rows a small
        ridge interpolates); the solve
        then runs at that ridge, where
        the same landmarks precondition it well. The rule reads repeated rows
        as one row of their summed weight, and sample weights as relative
        (scaling them all changes nothing). The value used is
        ``alpha_``. For a kernel that is not positive semi-definite,
        ``"auto"`` is 0. With ``alpha=0`` the minimiser interpolates the
        training data, and only stopping early (``tol``, ``max_iter``,
        ``early_stopping``) regularises. With centers, solvers "cg" and
        "newton" start at a ridge of at least 1e-7 times the mean of k(c, c)
        and then go on at a smaller positive ``alpha``, which warns where
        they cannot resolve it (the user guide says why).
"""

CLASSIFIER_ALPHA = """\
    alpha : float or "auto", default="auto"
        Ridge strength (>= 0) in the objective below, as in
        :class:`KernelGDRegressor`. ``"auto"``: with the squared loss the
        regressor's rule on the +-1 targets of every class,
        or another ridge where that one's leave-one-out error rate (on the same
        Nystroem model) is lower by two standard errors (a larger one; up
        to 1,000 distinct rows, a smaller one too);
        with the logistic loss that rule (its spectrum cut at the rounding of the
        precision K is stored in: below float32's, Newton's steps slow on nearly
        separable problems) scaled by the loss's curvature at the
        intercept-only model over the squared loss's (``p (1 - p) / 2`` for
        two classes of shares ``p`` and ``1 - p``; the mean of
        ``p_c (1 - p_c) / 2`` over the classes otherwise), so that the first
        Newton step is the smoother the rule chose. Where Newton's exact
        system of the distinct rows is small (a few hundred rows), that ridge
        times 16, 4, 1, 1/4 and 1/16 is fitted instead (going on past an end
        chosen, to at most 256 or 1/256), and the largest whose leave-one-out
        log-loss exceeds the least by at most one standard error of that
        excess is kept: approximated by one Newton step without each row,
        and computed exactly (Newton's iterations without the row) where that
        step moves the row's loss by more than half a nat, for the ridges the
        choice rests on. With ``sigma="scale"`` and the rbf, laplacian or
        exponential kernel, where that system has at most 512 unknowns (two
        classes, or up to 169 rows of three classes, 127 of four), that path
        runs at 1, 1.41 and 2 times that width, each from the rule's ridge for
        it, and the widest whose chosen ridge's losses exceed the least by at
        most one standard error is kept (``sigma_``). On larger sets with up
        to four classes, that path runs on three random subsamples of that
        size (going on past its ends, 65,536 to 1/256, but not below the least
        ridge) and their median multiple scales the rule's ridge, which
        held-out rows of the whole set then move by factors of 4 while each
        step lowers their log-loss by more than one standard error of the
        paired difference (the best multiple moves as the rows grow; a fifth
        of the rows held out from each fit, in as many folds as hold 500 rows
        together, at most five: a few wrong labels lead the log-loss), and
        where the first subsample's path at half ``sigma="scale"``'s width
        has a leave-one-out log-loss lower by one standard error, those
        held-out rows then try half the width and a quarter (each at its own
        rule's ridge times the multiple chosen), keeping each that lowers
        their log-loss by one standard error (``sigma_``); with more
        classes, from 4,000 rows, held-out rows of a quarter of the rows
        choose that multiple from 1/4, 1 and 4 instead. Beyond the
        small systems, where the rule's ridge is within 100 times the least
        it tries, the ridge of least log-loss on those held-out rows
        instead (from 4^10 times the least down by factors of 4 while
        that loss falls). It is
        positive, so a minimiser exists even on separable data. The value used is
        ``alpha_``. On many classes the smaller ridge costs Newton steps:
        letter (16,000 rows, 26 classes) takes one to two minutes, where
        ``alpha=1 / (2 * n_samples)`` (``C=1``) takes 7.4 s and underfits
        (the user guide's figures).
"""
