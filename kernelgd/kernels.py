"""The kernel registry.

Every kernel is one small function ``function(X, Y, **params)`` that returns
the block ``K[i, j] = k(X[i], Y[j])``, plus one registry entry that says
which estimator parameters it takes, whether it is positive semi-definite
(PSD) and how to compute its diagonal ``k(x, x)`` cheaply.

The formulas are those of the kernelgd documentation (texts differ on
some constants; these are ours):

==============  ==============================================  =====
name            k(x, z)                                         PSD
==============  ==============================================  =====
linear          x'z                                             yes
polynomial      (coef0 + x'z / sigma^2) ** degree               yes*
rbf             exp(-||x - z||^2 / sigma^2)                     yes
exponential     exp(-||x - z|| / (2 sigma^2))                   yes
laplacian       exp(-||x - z||_1 / sigma)                       yes
sigmoid         tanh(a x'z + coef0)                             no
all_subsets     prod_k (1 + x_k z_k)                            yes
==============  ==============================================  =====

(*) for an integer degree and coef0 >= 0. ``poly`` is an alias of
``polynomial`` and ``gaussian`` one of ``rbf``.

Per-feature scales: for rbf, laplacian and exponential, ``sigma`` may also
be an array of shape (n_features,). Feature j is then divided by its own
scale, ``sigma_j`` for rbf and laplacian and ``sigma_j**2`` for exponential,
and the kernel with ``sigma=1`` is applied to the rescaled features; a
constant array gives the scalar kernel.
"""

import inspect
from dataclasses import dataclass
from numbers import Real
from typing import Callable

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_array
from sklearn.utils.extmath import safe_sparse_dot

from ._array_api import (
    all_finite, as_float64, cast, column_means, common_float, concat, diagonal, exp_in_place, full_as, input_namespace,
    is_float32, scales_like, to_numpy,
)
from ._distances import (
    euclidean, sq_norms, neg_l1_distances, neg_sq_distances, raise_not_representable, subset_products,
    subset_products_diag,
)

__all__ = [
    "KernelSpec",
    "kernel_matrix",
    "register_kernel",
    "available_kernels",
    "linear",
    "polynomial",
    "rbf",
    "exponential",
    "laplacian",
    "sigmoid",
    "all_subsets",
]

# Estimator parameters that a kernel may ask for through ``params``.
ESTIMATOR_PARAMS = ("sigma", "degree", "coef0")
def linear(X, Y):
    """Linear kernel ``k(x, z) = x'z``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import linear
    >>> linear(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    array([[11.]])
    """
    X, Y = common_float(X, Y)
    return safe_sparse_dot(X, Y.T, dense_output=True)


def polynomial(X, Y, degree=3, coef0=1.0, sigma=1.0):
    """Polynomial kernel ``k(x, z) = (coef0 + x'z / sigma**2) ** degree``.

    ``1 / sigma**2`` is scikit-learn's ``gamma``. The estimators' default
    ``sigma="scale"`` sets ``sigma**2`` to n_features times X's mean square,
    so that ``x'x / sigma**2`` is 1 on average (on centred X, this is
    ``SVC(kernel="poly")``'s ``gamma="scale"``) and the model does not
    change when X is multiplied by a constant.
    Values that do not fit in float64 raise a ValueError instead of
    becoming inf.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    degree : float, default=3
        The exponent; a non-integer degree needs ``coef0 + x'z / sigma**2 >= 0``.
    coef0 : float, default=1.0
        The constant added to the scaled inner product.
    sigma : float, default=1.0
        The inner product is divided by ``sigma**2``.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import polynomial
    >>> polynomial(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), degree=2)
    array([[144.]])
    >>> polynomial(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]), degree=2, sigma=np.sqrt(11.0))
    array([[4.]])
    """
    if sigma != 1.0:  # (x / sigma)'(z / sigma): x'z and sigma**2 overflow where their ratio need not
        scale = _inverse_scale(sigma, 1, "polynomial")
        X, Y = X * scale, Y * scale
    K = linear(X, Y)
    K += coef0
    with np.errstate(over="ignore", invalid="ignore"):
        K **= degree
    if not all_finite(K):
        xp = input_namespace(K)
        if bool(xp.any(xp.isnan(K))):
            raise ValueError(
                f"The polynomial kernel with non-integer degree={degree} is "
                "undefined where coef0 + x'z / sigma**2 < 0. Use an integer degree or a "
                "larger coef0."
            )
        limit = "3.4e38 in float32; options={'dtype': 'float64'} goes to 1.8e308" if is_float32(K) else "1.8e308"
        raise_not_representable("polynomial", f"(coef0 + x'z / sigma**2) ** degree exceeds about {limit}")
    return K


def _centred_scaled(X, Y, scale):
    """``(X - c) * scale`` and ``(Y - c) * scale`` with c the mean of Y, shifted and scaled in float64, returned
    in the inputs' precision: the expansion ``|x|^2 - 2 x'z + |z|^2`` cancels catastrophically for features
    far from zero, and ``|x|^2`` can overflow where ``|x - z| / sigma`` does not. Sparse inputs are only
    scaled (a shift would make them dense).
    """
    _checkscales_like(scale, X)
    if sp.issparse(X) or sp.issparse(Y):
        if np.ndim(scale):  # a column scaling keeps the sparsity
            D = sp.diags(scale)
            return (X @ D).tocsr() if sp.issparse(X) else X * scale, (Y @ D).tocsr() if sp.issparse(Y) else Y * scale
        return X * scale, Y * scale
    dtype = np.float32 if is_float32(X) else np.float64
    c = column_means(Y) if Y.shape[0] else 0.0
    scale = scales_like(scale, X)
    with np.errstate(over="ignore"):
        return cast((X - c) * scale, dtype), cast((Y - c) * scale, dtype)


def _inverse_scale(sigma, power, name):
    """``1 / sigma**power`` as float64 (per feature for an array), or a clear error where it is not representable."""
    with np.errstate(over="ignore", divide="ignore", under="ignore"):
        value = 1.0 / np.asarray(sigma, dtype=np.float64) ** power
    if not np.all(np.isfinite(value)):
        raise ValueError(
            f"sigma={sigma!r} is too small for the {name} kernel: 1 / sigma**{power} "
            "overflows float64. Use a larger sigma, or scale the features up."
        )
    return float(value) if value.ndim == 0 else value


def _checkscales_like(scale, X):
    """Per-feature scales must match the features."""
    if np.ndim(scale) and np.shape(scale) != (X.shape[1],):
        raise ValueError(
            f"sigma has shape {np.shape(scale)} but X has {X.shape[1]} features: per-feature "
            "scales need one entry per feature."
        )


def rbf(X, Y, sigma=1.0, out=None):
    """Gaussian (RBF) kernel ``k(x, z) = exp(-||x - z||^2 / sigma^2)``.

    This is scikit-learn's ``rbf_kernel`` with ``gamma = 1 / sigma**2``.
    The inputs are shifted by a common point and divided by sigma before the
    distances are expanded, so float32 blocks stay accurate for features far
    from zero.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.
    out : ndarray of shape (n_X, n_Y), default=None
        Where to write K (its dtype must be that of X and Y).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import rbf
    >>> rbf(np.array([[0.0, 0.0]]), np.array([[1.0, 1.0]]), sigma=1.0)
    array([[0.13533528]])
    """
    X, Y = common_float(X, Y)
    Xs, Ys = _centred_scaled(X, Y, _inverse_scale(sigma, 1, "rbf"))
    return neg_sq_distances(Xs, Ys, out=out, then=exp_in_place)


def exponential(X, Y, sigma=1.0):
    """Exponential kernel ``k(x, z) = exp(-||x - z|| / (2 sigma^2))``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import exponential
    >>> exponential(np.array([[0.0, 0.0]]), np.array([[3.0, 4.0]]), sigma=1.0)
    array([[0.082085]])
    """
    # Distances (not squared) need float64: the square root would amplify
    # the rounding of the GEMM expansion to about sqrt(eps).
    X, Y = common_float(X, Y)
    per_feature = np.ndim(sigma) > 0
    # ||x - z|| / (2 sigma^2) = ||x/sigma - z/sigma|| / (2 sigma); per feature, x_j / sigma_j^2 and sigma = 1
    scale = _inverse_scale(sigma, 2 if per_feature else 1, "exponential")
    Xs, Ys = _centred_scaled(*common_float(X, Y, np.float64), scale)
    D = euclidean(Xs, Ys, same=Y is X)
    D *= -0.5 if per_feature else -1.0 / (2.0 * sigma)
    return cast(exp_in_place(D), np.float32 if is_float32(X) else np.float64)


def laplacian(X, Y, sigma=1.0, out=None):
    """Laplacian kernel ``k(x, z) = exp(-||x - z||_1 / sigma)``.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    sigma : float or ndarray of shape (n_features,), default=1.0
        The bandwidth, > 0; an array gives each feature its own.
    out : ndarray of shape (n_X, n_Y), default=None
        Where to write K (its dtype must be that of X and Y).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import laplacian
    >>> laplacian(np.array([[0.0, 0.0]]), np.array([[1.0, -1.0]]), sigma=2.0)
    array([[0.36787944]])
    """
    X, Y = common_float(X, Y)
    scale = _inverse_scale(sigma, 1, "laplacian")
    Xs, Ys = _centred_scaled(X, Y, scale)  # |x - z| directly: the shift only keeps |x/sigma| finite
    return neg_l1_distances(Xs, Ys, out=out, then=exp_in_place)


def sigmoid(X, Y, coef0=1.0, a=None):
    """Sigmoid kernel ``k(x, z) = tanh(a x'z + coef0)``; not PSD.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)
    coef0 : float, default=1.0
        The offset.
    a : float, default=None
        The slope; ``None`` means ``1 / n_features``. Pass it through the
        estimators' ``kernel_params={"a": ...}``.

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import sigmoid
    >>> sigmoid(np.array([[1.0, 1.0]]), np.array([[1.0, 1.0]]), coef0=0.0)
    array([[0.76159416]])
    """
    a = 1.0 / X.shape[1] if a is None else a
    K = linear(X, Y)
    if not all_finite(K):  # tanh would read an overflowed x'z as its sign (or inf - inf as NaN)
        raise_not_representable("sigmoid", "an inner product x'z overflows")
    K *= a
    K += coef0
    return input_namespace(K).tanh(K)


def all_subsets(X, Y):
    """All-subsets kernel ``k(x, z) = prod_k (1 + x_k z_k)``.

    It is the inner product of the 2**d features "all products of subsets
    of the inputs" (see :class:`kernelgd.AllSubsetsFeatures`), computed in
    O(d) per pair. The product is formed without overflow wherever the
    result fits in float64, and a ValueError is raised where it does not.

    Parameters
    ----------
    X : ndarray of shape (n_X, n_features)
    Y : ndarray of shape (n_Y, n_features)

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd.kernels import all_subsets
    >>> all_subsets(np.array([[1.0, 2.0]]), np.array([[3.0, 4.0]]))
    array([[36.]])
    """
    return subset_products(*common_float(X, Y, np.float64))


# ------------------------------------------------------------- diagonals


def _ones_diag(X, **params):
    return full_as(X, (X.shape[0],), 1.0) if not sp.issparse(X) else np.ones(X.shape[0])


def _linear_diag(X):
    return sq_norms(X)


def _polynomial_diag(X, degree=3, coef0=1.0, sigma=1.0):
    if sigma != 1.0:  # |x / sigma|^2, as the kernel scales its inner products
        X = X * _inverse_scale(sigma, 1, "polynomial")
    with np.errstate(over="ignore", invalid="ignore"):
        d = (sq_norms(X) + coef0) ** degree
    if not all_finite(d):
        polynomial(X, X, degree=degree, coef0=coef0, sigma=sigma)  # raises the clear error
    return d


def _sigmoid_diag(X, coef0=1.0, a=None):
    a = 1.0 / X.shape[1] if a is None else a
    d = sq_norms(X)
    return input_namespace(d).tanh(a * d + coef0)


def _all_subsets_diag(X):
    return subset_products_diag(common_float(X, X, np.float64)[0])


# ---------------------------------------------------------------- registry


@dataclass(frozen=True)
class KernelSpec:
    """A registered kernel: its function and what is known about it.

    :func:`register_kernel` returns one. It can be passed as ``kernel=`` to
    the estimators and :func:`kernel_matrix`, and it pickles with its
    function by reference, so it works in joblib/loky and Dask workers that
    never ran the registration. Calling it evaluates the kernel function.
    """

    name: str
    function: Callable
    params: tuple = ()
    psd: bool = True
    diag: Callable = None
    # Translation invariant (k(x + c, z + c) = k(x, z)): the operator may
    # shift the data to keep float32 distances accurate.
    stationary: bool = False
    # The function takes scipy.sparse CSR X and Y.
    sparse: bool = False
    # sigma may be an array of per-feature scales.
    per_feature: bool = False
    # The kernel divides distances by sigma**sigma_power: sigma="scale" takes that root of the
    # data's scale, so that scaling X by c scales sigma**sigma_power by c.
    sigma_power: int = 1
    # sigma="scale" measures X's spread about its mean (a kernel of differences ignores the mean)
    # or, False, about 0 (a kernel of inner products sees the mean: x'z / sigma^2 then stays O(1)).
    centred_scale: bool = True

    def __call__(self, X, Y, **params):
        return self.function(X, Y, **params)


_REGISTRY = {}
_ALIASES = {"poly": "polynomial", "gaussian": "rbf"}
_BUILTINS = set()


def _add(spec, builtin=False):
    _REGISTRY[spec.name] = spec
    if builtin:
        _BUILTINS.add(spec.name)


_add(KernelSpec("linear", linear, (), True, _linear_diag, sparse=True), True)
_add(KernelSpec("polynomial", polynomial, ("degree", "coef0", "sigma"), True, _polynomial_diag, sparse=True,
                centred_scale=False), True)
_add(KernelSpec("rbf", rbf, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True), True)
_add(KernelSpec("exponential", exponential, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True,
                sigma_power=2), True)
_add(KernelSpec("laplacian", laplacian, ("sigma",), True, _ones_diag, stationary=True, sparse=True, per_feature=True), True)
_add(KernelSpec("sigmoid", sigmoid, ("coef0",), False, _sigmoid_diag, sparse=True), True)
_add(KernelSpec("all_subsets", all_subsets, (), True, _all_subsets_diag, sparse=True), True)


def is_builtin(spec):
    """Whether ``spec`` is one of kernelgd's own kernels (private helper)."""
    return _REGISTRY.get(spec.name) is spec and spec.name in _BUILTINS


def available_kernels():
    """Names of the registered kernels, aliases included.

    Returns
    -------
    names : list of str
        Sorted names usable as ``kernel=`` in the estimators.

    Examples
    --------
    >>> from kernelgd.kernels import available_kernels
    >>> "rbf" in available_kernels()
    True
    """
    return sorted(set(_REGISTRY) | set(_ALIASES))


def register_kernel(name, function, *, params=(), psd=True, diag=None, sparse=False, per_feature=False):
    """Register a kernel under a name usable everywhere a built-in is.

    After registration ``kernel=name`` works in the estimators and in
    :func:`kernel_matrix` in this process, and an estimator pickled with
    ``kernel=name`` carries the kernel with it, so grid searches with
    ``n_jobs`` (joblib/loky) and Dask workers find the name too (the
    function must pickle: loky and Dask pickle a function of ``__main__``
    or a closure by value). The returned :class:`KernelSpec` works
    everywhere as ``kernel=spec``, also in :func:`kernel_matrix` calls in
    other processes. Installed packages can also register kernels by name through
    the entry-point group ``"kernelgd.kernels"`` (each entry point names a
    ``KernelSpec``, for example the result of ``register_kernel`` in the
    package's module); such names resolve in any process.

    Parameters
    ----------
    name : str
        The new kernel's name. Built-in names and aliases cannot be reused;
        registering a user name again replaces the earlier entry.
    function : callable
        ``function(X, Y, **p)`` returning the block of shape
        ``(len(X), len(Y))`` with ``K[i, j] = k(X[i], Y[j])``.
    params : str or tuple of str, default=()
        The estimator parameters passed on to ``function`` (any of
        ``"sigma"``, ``"degree"``, ``"coef0"``). ``p`` also holds the
        estimator's ``kernel_params``.
    psd : bool, default=True
        Whether the kernel is positive semi-definite; fitting with a kernel
        registered with ``psd=False`` warns.
    diag : callable, default=None
        ``diag(X, **p)`` returning ``k(X[i], X[i])``; by default it is
        computed from ``function`` in small blocks.
    sparse : bool, default=False
        Whether ``function`` (and ``diag``) accept scipy.sparse CSR inputs.
        Fitting a kernel registered without it on sparse X raises a
        ValueError.
    per_feature : bool, default=False
        Whether ``function`` accepts ``sigma`` as an array of shape
        (n_features,), one scale per feature (as the built-in rbf does).

    Returns
    -------
    spec : KernelSpec
        The registered kernel, usable as ``kernel=spec``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelgd import kernel_matrix, register_kernel
    >>> def cosine(X, Y):
    ...     Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    ...     Yn = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    ...     return Xn @ Yn.T
    >>> spec = register_kernel("cosine", cosine)
    >>> kernel_matrix([[1.0, 0.0]], [[1.0, 1.0]], kernel="cosine")
    array([[0.70710678]])
    >>> kernel_matrix([[1.0, 0.0]], [[1.0, 1.0]], kernel=spec)
    array([[0.70710678]])
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"A kernel name must be a non-empty string, got {name!r}.")
    if name in _BUILTINS or name in _ALIASES or name == "precomputed":
        raise ValueError(f"{name!r} is a built-in kernel name; choose another name.")
    if not callable(function):
        raise ValueError(f"function must be callable, got {type(function).__name__}.")
    params = (params,) if isinstance(params, str) else tuple(params)
    unknown = set(params) - set(ESTIMATOR_PARAMS)
    if unknown:
        raise ValueError(
            f"params may only name {ESTIMATOR_PARAMS}; got unknown {sorted(unknown)}."
        )
    spec = KernelSpec(name, function, params, bool(psd), diag, sparse=bool(sparse), per_feature=bool(per_feature))
    _add(spec)
    return spec


ENTRY_POINT_GROUP = "kernelgd.kernels"


def _from_entry_points(name):
    """The KernelSpec an installed package registers under ``name``, or None."""
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            spec = ep.load()
            if not isinstance(spec, KernelSpec):
                raise ValueError(
                    f"The entry point {ep.value!r} of group {ENTRY_POINT_GROUP!r} must name "
                    f"a kernelgd.kernels.KernelSpec (from register_kernel), got {type(spec).__name__}."
                )
            _add(spec)
            return spec
    return None


def _user_specs(kernel):
    """The user-registered specs that ``kernel`` (a name, or a list of kernels) refers to by name."""
    kernels = kernel if isinstance(kernel, (list, tuple)) else [kernel]
    names = {_ALIASES.get(k, k) for k in kernels if isinstance(k, str)}
    return [_REGISTRY[k] for k in sorted(names) if k in _REGISTRY and k not in _BUILTINS]


class _CarriesRegisteredKernels:
    """Pickles the specs of user-registered kernel names with the estimator: joblib (loky) and Dask workers
    unpickle it in another process, whose registry lacks the name. The spec travels with it (its function
    pickled by value by cloudpickle) and is registered on arrival where the name is still free.
    """

    def __getstate__(self):
        state = super().__getstate__()
        specs = _user_specs(getattr(self, "kernel", None))
        if specs:
            state = dict(state, _kernelgd_registered=specs)
        return state

    def __setstate__(self, state):
        for spec in state.pop("_kernelgd_registered", ()):
            _REGISTRY.setdefault(spec.name, spec)
        super().__setstate__(state)


def get_spec(kernel):
    """The registry entry of a kernel name, KernelSpec or callable (private helper)."""
    if isinstance(kernel, KernelSpec):
        return kernel
    if callable(kernel):
        name = getattr(kernel, "__name__", "callable")
        return KernelSpec(name, kernel, (), True, None)
    if isinstance(kernel, str):
        key = _ALIASES.get(kernel, kernel)
        if key in _REGISTRY:
            return _REGISTRY[key]
        spec = _from_entry_points(key)
        if spec is not None:
            return spec
    raise ValueError(
        f"Unknown kernel {kernel!r}. Use one of {available_kernels()}, "
        "'precomputed', a callable f(X, Y) -> matrix, or register a new one "
        "with kernelgd.register_kernel. A registered name exists only in the process that "
        "registered it (and in estimators pickled from there): in other processes pass the "
        "KernelSpec that register_kernel returns as kernel=, or register the kernel through "
        f"the {ENTRY_POINT_GROUP!r} entry point."
    )


class BoundKernel:
    """A kernel with its parameters fixed: ``K = bound(X, Y)``.

    Validates what the kernel function returns, so no solver ever sees a
    wrongly shaped, infinite or NaN block.
    """

    def __init__(self, spec, params):
        self.spec = spec
        self.params = dict(params)
        self.name = spec.name
        self.psd = spec.psd
        self.writes_out = False
        try:
            sig = inspect.signature(spec.function)
        except (TypeError, ValueError):  # some builtins have no signature
            return
        self.writes_out = "out" in sig.parameters
        if "out" in self.params:
            raise ValueError(
                f"kernel_params may not set 'out' (the {spec.name} kernel's output "
                "buffer, managed by kernelgd). Remove it from kernel_params."
            )
        try:
            sig.bind(None, None, **self.params)
        except TypeError as exc:
            raise ValueError(
                f"The {spec.name} kernel does not accept the parameters "
                f"{sorted(self.params)}: {exc}. Check kernel_params."
            ) from None

    def fill(self, out, X, Y):
        """Write ``K(X, Y)`` into the numpy block ``out`` (in place when the kernel supports it)."""
        if self.writes_out and out.dtype == X.dtype == Y.dtype:
            self.spec.function(X, Y, out=out, **self.params)
            self._check(out)
        else:
            out[...] = self(X, Y)

    def __call__(self, X, Y):
        """The block ``K(X, Y)`` in X's namespace and on its device, in float32 if X and Y are float32.

        A user's kernel gets the arrays as they are: it must support their namespace.
        """
        try:  # an inf or NaN from overflow is _check's clear error, not numpy's warnings
            with np.errstate(over="ignore", invalid="ignore"):
                K = self.spec.function(X, Y, **self.params)
        except TypeError as exc:  # numpy's ufunc type errors too: a kernel_params value of the wrong type
            if not self.params:
                raise
            raise ValueError(
                f"The {self.name} kernel failed with the parameters {self.params}: {exc}. "
                "Check the types of kernel_params."
            ) from exc
        K = common_float(K, K, np.float32 if is_float32(X) and is_float32(Y) else np.float64)[0]
        expected = (X.shape[0], Y.shape[0])
        if tuple(K.shape) != expected:
            raise ValueError(
                f"The {self.name} kernel returned shape {tuple(K.shape)}; expected "
                f"{expected}, one row per X sample and one column per Y sample."
            )
        self._check(K)
        return K

    def _check(self, K):
        # One reduction finds any inf or NaN; the full test only if it fails
        # (a finite sum can overflow).
        xp = input_namespace(K)
        with np.errstate(over="ignore", invalid="ignore"):
            total_finite = all_finite(xp.sum(K))
        if not total_finite and not all_finite(K):
            hint = (
                " In float32 the range ends at 3.4e38: options={'dtype': 'float64'} "
                "computes in float64." if is_float32(K) else ""
            )
            params = f" with {self.params}" if self.params else ""
            raise ValueError(
                f"The {self.name} kernel{params} returned inf or NaN values for this "
                "data. Scale the features or change the kernel parameters." + hint
            )

    def gaussian_scale(self):
        """``1 / sigma`` (per feature for an array sigma) where this is the rbf kernel, else None.

        The rbf kernel is ``exp(-|a - b|^2)`` of the features times this scale: the form that a
        fused device product (the operator's) evaluates.
        """
        if self.spec.function is not rbf:
            return None
        return _inverse_scale(self.params.get("sigma", 1.0), 1, "rbf")

    def diag(self, X):
        """``k(X[i], X[i])`` for every row, in float64."""
        if self.spec.diag is not None:
            return as_float64(self.spec.diag(X, **self.params))
        blocks = [X[start : start + 256] for start in range(0, X.shape[0], 256)]
        return concat([as_float64(diagonal(self(block, block))) for block in blocks]) if blocks \
            else full_as(X, (0,), 0.0)


def check_sigma(sigma, spec):
    """sigma as a float > 0, or as a 1-d float64 array of them where the kernel takes per-feature scales."""
    if isinstance(sigma, Real) and not isinstance(sigma, bool):
        if sigma > 0:
            return sigma
        raise ValueError(f"sigma must be a float > 0, got {sigma!r}.")
    if isinstance(sigma, str) or not np.ndim(sigma):
        raise ValueError(f"sigma must be a float > 0, got {sigma!r}.")
    if not spec.per_feature:
        raise ValueError(
            f"The {spec.name} kernel takes one scalar sigma, got an array: per-feature scales work with "
            "rbf, laplacian and exponential, and kernels registered with per_feature=True."
        )
    try:
        values = np.asarray(to_numpy(sigma), dtype=np.float64)  # another namespace's scales: on the host
    except (TypeError, ValueError):
        raise ValueError(f"sigma must be a float > 0 or an array of them, got {sigma!r}.") from None
    if values.ndim != 1 or not values.size or not np.all(np.isfinite(values) & (values > 0)):
        raise ValueError(
            f"Per-feature sigma must be a 1-d array of finite floats > 0, one per feature; got {sigma!r}."
        )
    return values


def bind_kernel(kernel, *, sigma=1.0, degree=3, coef0=1.0, kernel_params=None):
    """A :class:`BoundKernel` from a name or callable and the estimator params."""
    spec = get_spec(kernel)
    values = {"sigma": sigma, "degree": degree, "coef0": coef0}
    params = {p: values[p] for p in spec.params}
    params.update(kernel_params or {})
    if "sigma" in params:
        params["sigma"] = check_sigma(params["sigma"], spec)
    return BoundKernel(spec, params)


def kernel_matrix(X, Y=None, *, kernel="rbf", sigma=1.0, degree=3, coef0=1.0, **kernel_params):
    """The kernel matrix ``K[i, j] = k(X[i], Y[j])``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_X, n_features)
        Sparse X works with every built-in kernel and with kernels
        registered with ``sparse=True``.
    Y : {array-like, sparse matrix} of shape (n_Y, n_features), default=None
        ``None`` means ``Y = X``.
    kernel : str or callable, default="rbf"
        A registered name (see :func:`available_kernels`) or a callable
        ``f(X, Y, **kernel_params)`` returning the block.
    sigma : float or array-like of shape (n_features,), default=1.0
        Bandwidth of ``rbf``, ``exponential`` and ``laplacian``, and the
        scale of ``polynomial``'s inner product; an array gives each feature
        its own scale (see the module docstring).
    degree : float, default=3
        Degree of ``polynomial``.
    coef0 : float, default=1.0
        Constant of ``polynomial`` and ``sigmoid``.
    **kernel_params
        Further keyword arguments of the kernel function (``a`` of
        ``sigmoid``, the parameters of a registered or callable kernel).

    Returns
    -------
    K : ndarray of shape (n_X, n_Y)

    Examples
    --------
    >>> from kernelgd import kernel_matrix
    >>> kernel_matrix([[0.0], [1.0]], kernel="rbf", sigma=1.0)
    array([[1.        , 0.36787944],
           [0.36787944, 1.        ]])
    """
    X = check_array(X, accept_sparse="csr", dtype=np.float64)
    Y = X if Y is None else check_array(Y, accept_sparse="csr", dtype=np.float64)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"X has {X.shape[1]} features but Y has {Y.shape[1]}; they must match."
        )
    bound = bind_kernel(
        kernel, sigma=sigma, degree=degree, coef0=coef0, kernel_params=kernel_params
    )
    check_sparse_support(bound.spec, X, Y)
    return bound(X, Y)


def check_sparse_support(spec, *arrays):
    """A clear error where sparse input meets a kernel that does not declare it."""
    if not spec.sparse and any(sp.issparse(A) for A in arrays):
        raise ValueError(
            f"The {spec.name} kernel does not accept sparse input. Convert X with "
            "X.toarray(), use a built-in kernel, or register the kernel with "
            "register_kernel(..., sparse=True) if its function handles scipy.sparse."
        )
