"""ftrans: composable function transformations for numerical Python (JAX's API)."""


from ftrans import (  # noqa: E402  # noqa: E402
    debug,
    distributed,
    dtypes,
    errors,
    example_libraries,
    experimental,
    extend,
    image,
    lax,
    nn,
    numpy,
    ops,
    random,
    scipy,
    sharding,
    test_util,
    tree,
    tree_util,
)
from ftrans._callback import pure_callback
from ftrans.core.array import PublicArray as Array
from ftrans.core.array import Shard
from ftrans.core.avals import ShapeDtypeStruct
from ftrans.core.config import config, config_context, make_user_context
from ftrans.core.jaxpr_api import eval_jaxpr, make_jaxpr
from ftrans.core.ref import Ref, empty_ref, free_ref, freeze, new_ref
from ftrans.core.sharding import NamedSharding, PartitionSpec, set_mesh
from ftrans.core.trace import ensure_compile_time_eval, named_call, named_scope
from ftrans.devices import (
    Device,
    block_until_ready,
    clear_backends,
    copy_to_host_async,
    default_backend,
    device_count,
    device_get,
    device_put,
    device_put_replicated,
    device_put_sharded,
    devices,
    host_count,
    host_id,
    host_ids,
    local_device_count,
    local_devices,
    print_environment_info,
    process_count,
    process_index,
    process_indices,
)
from ftrans.distributed import (  # noqa: E402
    make_array_from_callback,
    make_array_from_process_local_data,
    make_array_from_single_device_arrays,
)
from ftrans.dtypes import float0
from ftrans.numpy._indexing import ds, dslice  # noqa: E402
from ftrans.sharding import get_abstract_mesh, get_mesh, make_mesh, reshard, use_abstract_mesh  # noqa: E402
from ftrans.transforms import sharded_eager as _sharded_eager  # noqa: E402,F401  (registers itself)
from ftrans.transforms.ad import jvp
from ftrans.transforms.batching import vmap
from ftrans.transforms.custom_derivatives import closure_convert, custom_gradient, custom_jvp, custom_vjp
from ftrans.transforms.jit import CompilerEffortLevel, Inline, clear_caches, disable_jit, eval_shape, jit
from ftrans.transforms.parallel import pmap
from ftrans.transforms.remat import checkpoint, checkpoint_policies, remat
from ftrans.transforms.reverse import (
    NotNeeded,  # noqa: F401  (JAX's api.NotNeeded, in a pullback's args_res)
    fwd_and_bwd,
    grad,
    hessian,
    jacfwd,
    jacrev,
    linear_transpose,
    linearize,
    value_and_grad,
    vjp,
)
from ftrans.transforms.reverse import std_basis as _std_basis  # noqa: F401  (JAX's private api._std_basis)
from ftrans.transforms.shard_map import shard_map, smap


def effects_barrier() -> None:
    """JAX's ``effects_barrier``: wait until every host callback of the programs run so far has finished.
    ftrans's compiled programs that call back into Python finish before their call returns, so there is
    nothing left to wait for."""


jacobian = jacrev  # JAX's name for the reverse-mode Jacobian
enable_x64 = config_context("enable_x64")
debug_nans = config_context("debug_nans")
debug_infs = config_context("debug_infs")
default_matmul_precision = config_context("default_matmul_precision")
log_compiles = config_context("log_compiles")
explain_cache_misses = config_context("explain_cache_misses")
allow_f16_reductions = config_context("allow_f16_reductions")
no_tracing = config_context("no_tracing")
no_execution = config_context("no_execution")
default_prng_impl = config_context("default_prng_impl")
check_tracer_leaks = config_context("check_tracer_leaks")
numpy_rank_promotion = config_context("numpy_rank_promotion")
numpy_dtype_promotion = config_context("numpy_dtype_promotion")


def checking_leaks():
    """JAX's ``checking_leaks()``: ``check_tracer_leaks(True)`` for the ``with`` block."""
    return check_tracer_leaks(True)



def default_device(device):
    """JAX's ``jax.default_device``: inside ``with ftrans.default_device(d):`` jitted functions run and
    ``device_put`` places on ``d`` (a Device, or a platform name such as ``"cpu"``) unless their arguments
    or options say otherwise; ``None`` restores the default backend's first device."""
    return config_context("default_device")(device)




def typeof(x):
    """JAX's ``typeof``: the abstract value (shape, dtype, weak type) of an array, tracer or scalar, with its
    sharding type (``typeof(x).sharding``, shown over the abstract mesh as JAX's: the layout over Explicit mesh
    axes, else each dimension unsplit)."""
    import numpy as _np

    from ftrans.core.array import Array as _CoreArray
    from ftrans.core.avals import ShapedArray, ShardedAval, ShownAval
    from ftrans.core.keys import is_key
    from ftrans.core.sharding import MeshlessType, NamedSharding, PartitionSpec, TypeSharding, get_mesh
    from ftrans.core.sharding_rules import array_aval
    from ftrans.core.trace import Tracer
    from ftrans.transforms.ad import float0 as _float0

    if isinstance(x, Ref):
        return x.aval
    if is_key(x):  # a typed key array's type is its key dtype over its key shape, as JAX's (not its uint32 data)
        return ShapedArray(tuple(x.shape), x.dtype)
    if type(x) is _np.ndarray and x.dtype == _float0:
        # a float0 tangent or cotangent (what jvp, vjp and grad give an integer or bool input or output): typed
        # as JAX's, though no operation takes it
        aval = ShapedArray(tuple(x.shape), _float0, False)
    else:
        aval = array_aval(x)
    if aval.typed_sharding is not None and type(aval) is ShardedAval:
        pass  # (its ``sharding`` is shown as JAX shows a type's sharding: over the abstract mesh)
    elif type(aval) is ShapedArray:  # untyped: each dimension unsplit, over its mesh, the current one, or none
        sh = getattr(x, "sharding", None) if isinstance(x, _CoreArray) else None
        # an uncommitted (host) array is placed over the mesh in context where it is used, as JAX's made there
        mesh = sh.mesh if isinstance(sh, NamedSharding) else get_mesh() if isinstance(x, Tracer) or (
            isinstance(x, _CoreArray) and not x.committed) else None
        spec = PartitionSpec(*(None,) * len(aval.shape))
        aval = ShownAval(aval, MeshlessType(spec) if mesh is None else TypeSharding.of(NamedSharding(mesh, spec)))
    return aval


from ftrans import version as version  # noqa: E402,I001  (jax.version)
from ftrans.core.version import __version__ as __version__  # noqa: E402
from ftrans.version import __version_info__ as __version_info__  # noqa: E402

P = PartitionSpec  # JAX's short name (jax.P)


def _ad_namespace():
    from types import SimpleNamespace

    from ftrans.transforms import reverse

    return SimpleNamespace(DontWant=reverse.DontWant, DidntWant=reverse.DidntWant, GradRef=reverse.GradRef,
                           GradValue=reverse.GradValue)


ad = _ad_namespace()  # JAX's jax.ad: the markers of a pullback's with_refs


def _memory_namespace():
    from types import SimpleNamespace

    from ftrans.core.avals import MemorySpace

    return SimpleNamespace(Space=MemorySpace)


memory = _memory_namespace()  # JAX's jax.memory: its memory spaces (jax.memory.Space)

__all__ = [
    "Array", "Shard", "ShapeDtypeStruct", "config", "dtypes", "errors", "eval_jaxpr", "eval_shape",
    "lax", "make_jaxpr", "numpy", "ops", "random", "tree", "tree_util", "jit", "clear_caches", "clear_backends", "devices", "local_devices", "device_count",
    "local_device_count", "default_backend", "device_put", "device_get", "block_until_ready", "copy_to_host_async",
    "device_put_sharded", "device_put_replicated",
    "process_index", "process_count", "jvp", "vjp", "fwd_and_bwd", "grad", "value_and_grad", "linearize", "linear_transpose",
    "jacfwd", "jacrev", "hessian", "custom_jvp", "custom_vjp", "custom_gradient", "closure_convert", "checkpoint", "remat", "checkpoint_policies",
    "ad_checkpoint", "custom_derivatives", "vmap", "pmap", "test_util",
    "nn", "scipy", "image", "example_libraries", "extend", "sharding", "debug", "make_mesh", "set_mesh", "reshard",
    "NamedSharding", "PartitionSpec", "P", "shard_map", "smap", "distributed", "make_array_from_callback",
    "make_array_from_single_device_arrays", "make_array_from_process_local_data",
    "Device", "float0", "disable_jit", "ensure_compile_time_eval", "named_call", "named_scope",
    "jacobian", "typeof", "enable_x64", "debug_nans", "debug_infs", "default_matmul_precision", "pure_callback",
    "effects_barrier", "experimental", "log_compiles", "explain_cache_misses", "allow_f16_reductions", "no_tracing",
    "no_execution", "default_device", "print_environment_info", "check_tracer_leaks", "checking_leaks",
    "make_user_context",
    "process_indices", "host_id", "host_count", "host_ids", "stages", "typing", "numpy_rank_promotion",
    "numpy_dtype_promotion", "custom_batching", "profiler", "dlpack", "monitoring", "ad", "memory",
    "default_prng_impl",
    "ref", "Ref", "new_ref", "empty_ref", "free_ref", "freeze", "ds", "dslice",
    "get_mesh", "get_abstract_mesh", "use_abstract_mesh", "CompilerEffortLevel", "Inline", "version",
]

from ftrans import (  # noqa: E402
    ad_checkpoint,
    custom_batching,
    custom_derivatives,
    dlpack,
    monitoring,
    profiler,
    ref,
    stages,
    typing,
)

__all__ += ["flatten_util"]
from ftrans import export as export  # noqa: E402,I001  (jax.export)
from ftrans import ffi as ffi  # noqa: E402,I001  (jax.ffi)
from ftrans import flatten_util  # noqa: E402
from ftrans import api_util as api_util  # noqa: E402,I001  (jax.api_util)

__all__ += ["export", "ffi", "api_util"]  # noqa: E402
# JAX's remaining configuration context managers and transfer guards (docs/differences.md, "Configuration
# options" and "Transfer guards").
from ftrans.devices import live_arrays  # noqa: E402

transfer_guard_host_to_device = config_context("transfer_guard_host_to_device")
transfer_guard_device_to_host = config_context("transfer_guard_device_to_host")
transfer_guard_device_to_device = config_context("transfer_guard_device_to_device")
enable_checks = config_context("enable_checks")
debug_key_reuse = config_context("debug_key_reuse")
legacy_prng_key = config_context("legacy_prng_key")
threefry_partitionable = config_context("threefry_partitionable")
enable_custom_prng = config_context("enable_custom_prng")
softmax_custom_jvp = config_context("softmax_custom_jvp")
thread_guard = config_context("thread_guard")
array_garbage_collection_guard = config_context("array_garbage_collection_guard")
remove_size_one_mesh_axis_from_type = config_context("remove_size_one_mesh_axis_from_type")
auto_pcast = config_context("auto_pcast")


def transfer_guard(new_val):
    """JAX's ``transfer_guard``: the guard level of every transfer direction for the ``with`` block ("allow",
    "log", "disallow", "log_explicit", "disallow_explicit"); ftrans checks host-to-device transfers (a
    jitted function's NumPy or Python-scalar arguments; ``device_put`` under the ``*_explicit`` levels)."""
    return config_context("transfer_guard")(new_val)


__all__ += ["live_arrays", "transfer_guard", "transfer_guard_host_to_device", "transfer_guard_device_to_host",
            "transfer_guard_device_to_device", "enable_checks", "debug_key_reuse", "legacy_prng_key",
            "threefry_partitionable", "enable_custom_prng", "softmax_custom_jvp", "thread_guard",
            "array_garbage_collection_guard", "remove_size_one_mesh_axis_from_type", "auto_pcast"]
# JAX's error checking inside traced code (JAX's internal error_check module; jnp's checks in ``ftrans.numpy.error``),
# imported on first use (importing it creates the thread's error state, a ref: see ftrans/error_check.py);
# not in ``__all__``, as JAX has no public ``jax.error_check``.


def __getattr__(name: str):
    if name == "error_check":
        import importlib

        return importlib.import_module("ftrans.error_check")
    raise AttributeError(f"module 'ftrans' has no attribute {name!r}")
