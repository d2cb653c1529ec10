"""Global switches, read from the environment at import and changed with ``config.update``.

Kept as plain attributes on one object so the hot paths (dtype canonicalisation,
eager dispatch) read a switch with a single attribute lookup.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import os
import threading
from typing import Any

import numpy as np


def _env_flag(name: str, default: bool = False) -> bool:
    v = os.environ.get(name)
    if v is None:
        return default
    return v.strip().lower() in ("1", "true", "yes", "on")


def _truth(name: str, value: Any, what: str) -> bool:
    """A boolean option's value: a bool (or NumPy's), 0/1, or one of JAX's truth strings ("true", "0", "yes",
    "off", ...); anything else raises ``ValueError`` naming the option (``what``: where the value came from)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("1", "true", "t", "yes", "y", "on"):
            return True
        if low in ("0", "false", "f", "no", "n", "off"):
            return False
    from ftrans.errors import FtransValueError

    raise FtransValueError(f"invalid truth value {value!r} for {what} {name!r}: expected True or False")


def _flag_from_env(env: str, default: bool) -> bool:
    v = os.environ.get(env)
    return default if v is None else _truth(env, v, "environment variable")


def default_cache_dir() -> str:
    """Where the compilation cache lives unless configured: ``$XDG_CACHE_HOME/ftrans/compilation``
    (``~/.cache/ftrans/compilation`` when XDG_CACHE_HOME is unset or not absolute)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ftrans", "compilation")


def _cache_dir_from_env() -> str | None:
    """``FTRANS_COMPILATION_CACHE_DIR`` (or its short alias ``FTRANS_CACHE_DIR``); empty turns the
    cache off; unset means the default directory."""
    for name in ("FTRANS_COMPILATION_CACHE_DIR", "FTRANS_CACHE_DIR"):
        v = os.environ.get(name)
        if v is not None:
            return v.strip() or None
    return default_cache_dir()


def _size_from_env(name: str, default: int) -> int:
    v = os.environ.get(name, "").strip()
    if not v:
        return default
    try:
        return _size_option(v)
    except (TypeError, ValueError):
        return default


_SIZE_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
               "g": 2**30, "gb": 2**30, "gib": 2**30}


def _size_option(value: Any) -> int:
    """A byte count from an int or a string such as ``"512M"``/``"2GiB"``; ``-1`` means no limit."""
    if isinstance(value, bool):
        raise TypeError(f"expected a size in bytes, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        s = value.strip().lower()
        num = s.rstrip("kmgib")
        unit = s[len(num):]
        if unit in _SIZE_UNITS:
            try:
                return int(float(num) * _SIZE_UNITS[unit])
            except ValueError:
                pass
    raise ValueError(f"expected a size in bytes (an int, or a string like '512M' or '2G'), got {value!r}")


DEFAULT_CACHE_MAX_SIZE = 2**30  # 1 GiB


def _names_tuple(value: Any) -> tuple[str, ...]:
    """A tuple of names from ``"a,b"``, ``None`` or an iterable of strings."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    try:
        names = tuple(value)
    except TypeError:
        raise TypeError(f"expected a list of names or a comma-separated string, got {value!r}") from None
    if not all(isinstance(n, str) for n in names):
        raise TypeError(f"expected a list of names (strings), got {value!r}")
    return names


def _passes_option(value: Any) -> tuple[str, ...] | None:
    """``optimizations``: ``None``/``"all"``/``True`` -> every pass (``None``); ``"none"``/``False``
    -> ``()``; else a tuple of pass names."""
    if value is None or value is True or (isinstance(value, str) and value.strip().lower() in ("all", "")):
        return None
    if value is False or (isinstance(value, str) and value.strip().lower() == "none"):
        return ()
    return _names_tuple(value)


def _slots_option(value: Any) -> int:
    """``while_checkpoints``: a positive int (a string of one, from the environment)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
        from ftrans.errors import FtransValueError

        raise FtransValueError(
            f"config option while_checkpoints must be a positive integer (the number of carries reverse mode "
            f"of a while_loop keeps), got {value!r}; e.g. ftrans.config.update('while_checkpoints', 64)")
    return int(value)


def _choice_option(name: str, value: Any, choices: tuple) -> str:
    """One of ``choices`` (case-insensitive), else a ValueError listing them."""
    v = getattr(value, "value", value)  # an enum member, as JAX's own option values are
    if isinstance(v, str) and v.strip().lower() in choices:
        return v.strip().lower()
    from ftrans.errors import FtransValueError

    raise FtransValueError(f"config option {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _choice_from_env(env: str, known: dict, default: str) -> str:
    v = os.environ.get(env, "").strip().lower()
    for _name, (var, kind) in known.items():
        if var == env:
            return v if v in kind else default
    return default


DEFAULT_BACKGROUND_COMPILATION = False  # measured in benchmarks/first_result.py; argued in docs/compilation_cache.md


def _int_option(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise TypeError(f"config option {name} takes an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"config option {name} takes an integer, got {type(value).__name__} {value!r}") from None


IR_DUMP_MODES = ("stablehlo", "jaxpr", "jaxpr_html", "eqn_count_pprof")


def _ir_modes_option(value: Any) -> str:
    """JAX's ``jax_dump_ir_modes``: a comma-separated list of ``IR_DUMP_MODES``."""
    if not isinstance(value, str):
        raise TypeError(f"config option dump_ir_modes takes a comma-separated string, got {value!r}")
    modes = [m.strip() for m in value.split(",") if m.strip()]
    bad = [m for m in modes if m not in IR_DUMP_MODES]
    if bad:
        from ftrans.errors import FtransValueError

        raise FtransValueError(f"config option dump_ir_modes: unknown mode(s) {', '.join(map(repr, bad))}; the "
                               f"modes are {', '.join(IR_DUMP_MODES)}")
    return ",".join(modes)


class Config:
    """The switches a JAX user sets with ``jax.config.update``."""

    _known = {
        "enable_x64": ("JAX_ENABLE_X64", bool),
        "disable_jit": ("JAX_DISABLE_JIT", bool),
        "debug_nans": ("JAX_DEBUG_NANS", bool),
        "debug_infs": ("JAX_DEBUG_INFS", bool),
        "compilation_cache_dir": ("FTRANS_COMPILATION_CACHE_DIR", str),
        "enable_compilation_cache": ("FTRANS_ENABLE_COMPILATION_CACHE", bool),
        "compilation_cache_max_size": ("FTRANS_COMPILATION_CACHE_MAX_SIZE", "size"),
        "disabled_passes": ("FTRANS_DISABLED_PASSES", tuple),
        "optimizations": ("FTRANS_OPTIMIZATIONS", "passes"),
        "while_checkpoints": ("FTRANS_WHILE_CHECKPOINTS", "slots"),
        "background_compilation": ("FTRANS_BACKGROUND_COMPILATION", bool),
        "deterministic": ("FTRANS_DETERMINISTIC", bool),
        "log_compiles": ("JAX_LOG_COMPILES", bool),
        "explain_cache_misses": ("JAX_EXPLAIN_CACHE_MISSES", bool),
        "no_tracing": ("JAX_NO_TRACING", bool),
        "no_execution": ("JAX_NO_EXECUTION", bool),
        "default_device": ("JAX_DEFAULT_DEVICE", "any"),
        "allow_f16_reductions": ("JAX_ALLOW_F16_REDUCTIONS", bool),
        "check_tracer_leaks": ("JAX_CHECK_TRACER_LEAKS", bool),
        "default_matmul_precision": ("JAX_DEFAULT_MATMUL_PRECISION", "any"),
        "numpy_rank_promotion": ("JAX_NUMPY_RANK_PROMOTION", ("allow", "warn", "raise")),
        "numpy_dtype_promotion": ("JAX_NUMPY_DTYPE_PROMOTION", ("standard", "strict")),
        "platforms": ("JAX_PLATFORMS", "any"),
        "num_cpu_devices": ("JAX_NUM_CPU_DEVICES", int),
        "dump_ir_to": ("JAX_DUMP_IR_TO", str),
        "dump_ir_modes": ("JAX_DUMP_IR_MODES", "ir_modes"),
        "default_prng_impl": ("JAX_DEFAULT_PRNG_IMPL", str),
        "random_seed_offset": ("JAX_RANDOM_SEED_OFFSET", int),
        "debug_key_reuse": ("JAX_DEBUG_KEY_REUSE", bool),
        "error_checking_behavior_nan": ("JAX_ERROR_CHECKING_BEHAVIOR_NAN", ("ignore", "raise")),
        "error_checking_behavior_divide": ("JAX_ERROR_CHECKING_BEHAVIOR_DIVIDE", ("ignore", "raise")),
        "error_checking_behavior_oob": ("JAX_ERROR_CHECKING_BEHAVIOR_OOB", ("ignore", "raise")),
        # JAX's sharding switches (docs/sharding.md, "Configuration switches"): mesh axes of size 1 left out of
        # sharding types and vma; implicit pvary in shard_map bodies; vmap-of-shard_map's spmd_axis_name check.
        "remove_size_one_mesh_axis_from_type": ("JAX_REMOVE_SIZE_ONE_MESH_AXIS_FROM_TYPE", "flag"),
        "auto_pcast": ("JAX_AUTO_PCAST", "flag"),
        "disable_vmap_shmap_error": ("JAX_DISABLE_VMAP_SHMAP_ERROR", "flag"),
        # jax 0.12's ``jax.sharding.no_collectives``: mesh axes no collective may cross (no environment variable)
        "no_collectives": (None, "axis_set"),
    }
    # JAX options a script may set that change nothing ftrans does, or that ftrans supports only at one
    # value: name -> (default, the values ftrans runs as JAX would, what the option is about). They are
    # accepted (a swapped-in JAX script sets them at its top) and read back; any other value is an error
    # that says why, never a silent difference (docs/differences.md, "Configuration options").
    _accepted = {
        "traceback_filtering": ("auto", (None, "off", "tracebackhide", "remove_frames", "quiet_remove_frames", "auto"),
                                "how tracebacks leaving ftrans are filtered (ftrans.core.traceback_util)"),
        "softmax_custom_jvp": (False, None, "softmax's derivative"),
        # Honoured by the printer (core/ir.py): programs print their constants where they are used.
        "use_simplified_jaxpr_constants": (False, (False, True), "how constants appear in printed IR"),
        "remat3": (False, None, "JAX's choice of remat implementation (how rematted code is differentiated, not "
                   "its values)"),
        "use_shardy_partitioner": (True, None, "the sharding annotation format"),
        "enable_checks": (False, None, "internal checks"),
        "persistent_cache_min_compile_time_secs": (1.0, None, "the compilation cache"),
        "persistent_cache_min_entry_size_bytes": (0, None, "the compilation cache"),
        "raise_persistent_cache_errors": (False, None, "the compilation cache"),
        "persistent_cache_enable_xla_caches": ("xla_gpu_per_fusion_autotune_cache_dir", None,
                                               "XLA's own GPU caches, which ftrans does not keep"),
        "logging_level": ("NOTSET", None, "logging"),
        "pprint_use_color": (True, None, "printing"),
        "captured_constants_warn_bytes": (2_000_000_000, None, "constants"),
        "traceback_in_locations_limit": (100, None, "locations"),
        "include_full_tracebacks_in_locations": (True, None, "locations"),
        "threefry_partitionable": (True, None, "the threefry counter scheme (jax's original one when False)"),
        "legacy_prng_key": ("allow", ("allow", "warn", "error"), "raw uint32 keys given to ftrans.random"),
        "enable_custom_prng": (False, None, "whether PRNGKey (and split/fold_in of raw keys) return typed keys"),
        "thread_guard": (False, (False,), "a guard against jit calls from other threads, which ftrans does not have"),
        "array_garbage_collection_guard": ("allow", ("allow", "log", None), "reports of arrays freed by the "
                                           "garbage collector (ftrans makes JAX's \"log\" report, not its "
                                           "\"fatal\" abort)"),
        # Diagnostics, logging, timeouts, GPU kernel choices and JAX-internal implementation switches: any
        # value runs as JAX would (none of them changes a result).
        **{name: (default, None, about) for name, default, about in (
            ("captured_constants_report_frames", 0, "constants"),
            ("check_proxy_envs", True, "proxy settings"),
            ("export_calling_convention_version", 10, "the export format (export checks it is one of the "
             "supported versions, 9 and 10, whose modules ftrans writes alike)"),
            ("compilation_cache_check_contents", False, "the compilation cache"),
            ("compilation_cache_expect_pgle", False, "the compilation cache"),
            ("compilation_cache_include_metadata_in_key", False, "the compilation cache"),
            ("compiler_detailed_logging_min_ops", 10, "logging"),
            ("compiler_enable_remat_pass", True, "XLA's rematerialization (memory, not values)"),
            ("cpu_enable_async_dispatch", True, "dispatch"),
            ("cpu_get_global_topology_timeout_minutes", 5, "timeouts"),
            ("cpu_get_local_topology_timeout_minutes", 2, "timeouts"),
            ("debug_leaked_clients_on_clear_backends", False, "logging"),
            ("debug_log_modules", "", "logging"),
            ("distributed_debug", False, "logging"),
            ("embedded_constants_max_bytes", 32, "constants"),
            ("enable_pgle", False, "profile-guided compilation, which ftrans does not do"),
            ("pgle_profiling_runs", 3, "profile-guided compilation"),
            ("pgle_aggregation_percentile", 90, "profile-guided compilation"),
            ("enable_preemption_service", True, "preemption"),
            ("include_debug_info_in_dumps", True, "dumps"),
            ("hlo_source_file_canonicalization_regex", None, "locations"),
            ("source_url_schema", None, "locations"),
            ("tracer_error_num_traceback_frames", 5, "error messages"),
            ("send_traceback_to_runtime", "off", "tracebacks"),
            ("share_binary_between_hosts", False, "compilation across processes"),
            ("share_binary_between_hosts_timeout_ms", 1_200_000, "compilation across processes"),
            ("use_direct_linearize", True, "JAX's linearization implementation"),
            ("custom_vjp3", False, "JAX's custom_vjp implementation"),
            ("scan3", False, "JAX's scan implementation"),
            ("refs_to_pins", False, "JAX's mutable array implementation"),
            ("mutable_array_checks", True, "JAX's mutable array checks"),
            ("disable_bwd_checks", False, "JAX's custom_vjp checks"),
            ("remove_custom_partitioning_ptr_from_cache_key", False, "the compilation cache"),
            ("xla_profile_version", 0, "profiling"),
            ("jax2tf_associative_scan_reductions", False, "jax2tf"),
            ("jax2tf_default_native_serialization", True, "jax2tf"),
            ("pallas_enable_debug_checks", False, "Pallas"),
            ("pallas_poison_buffers", False, "Pallas"),
            ("pallas_use_mosaic_gpu", True, "Pallas"),
            ("pallas_verbose_errors", False, "Pallas"),
            ("mosaic_allow_hlo", False, "Mosaic"),
            ("ragged_dot_use_gpu_pallas_triton_lowering", False, "GPU kernels for ragged_dot"),
            ("ragged_dot_use_ragged_dot_instruction", True, "GPU kernels for ragged_dot"),
            ("threefry_gpu_kernel_lowering", False, "a GPU kernel for threefry (same bits)"),
            ("use_magma", "auto", "GPU linear algebra kernels"),
            ("bcoo_cusparse_lowering", False, "GPU sparse kernels"),
            ("use_emit_pipeline_primitive", False, "Pallas"),
            # jax 0.11's
            ("custom_jvp3", False, "JAX's custom_jvp implementation"),
            ("remat_barrier_no_cotangents", False, "JAX's remat implementation"),
            ("use_cpp_shard_args", False, "dispatch"),
            ("use_hlo_logistic_lowering", None, "TPU kernels for logistic"),
            ("use_rgv3", True, "the replica-group format of lowered shard_map collectives"),
            ("pallas_auto_assign_collective_ids", "no", "Pallas"),
            ("pallas_auto_assign_collective_ids_limit", 25, "Pallas"),
            ("raise_on_ppermute_sort_diff", True, "jax 0.11's refusal of a ppermute whose axis names are not in "
             "the mesh's order (ftrans permutes by the axes as named)"),
            ("platform_name", "", "the default platform (also sets ftrans's default_device)"),
            # jax 0.12's
            ("mosaic_unzip_debug_locations", True, "Mosaic"),
        )},
        # What an explicitly requested 64-bit dtype without x64 does (dtypes.check_requested): JAX's modes,
        # as its enum's values or names.
        "explicit_x64_dtypes": ("warn", (1, 2, 3, "warn", "error", "allow"), "explicitly requested 64-bit "
                                "dtypes without x64"),
        # Options that change what a program does: ftrans runs as JAX does at JAX's default only, and says so
        # for any other value.
        **{name: (default, (default,) if not isinstance(default, tuple) else default, about)
           for name, default, about in (
            ("check_vma", False, "shard_map's replication check default"),
            ("eager_constant_folding", False, "constant folding during tracing"),
            ("backend_target", "", "a remote backend"),
            ("xla_backend", "", "the XLA backend"),
            ("check_static_indices", False, "checks of static indices"),
            ("cpu_collectives_implementation", "gloo", "the CPU collectives of several processes"),
            ("cross_host_transfer_socket_address", "", "cross-host transfers"),
            ("cross_host_transfer_timeout_seconds", None, "cross-host transfers"),
            ("cross_host_transfer_transfer_size", None, "cross-host transfers"),
            ("cross_host_transport_addresses", "", "cross-host transfers"),
            ("force_dcn_cross_host_transfers", False, "cross-host transfers"),
            ("cuda_visible_devices", "all", "which GPUs are visible"),
            ("rocm_visible_devices", "all", "which GPUs are visible"),
            ("oneapi_visible_devices", "all", "which GPUs are visible"),
            ("disable_most_optimizations", False, "XLA's optimizations"),
            ("disallow_mesh_context_manager", False, "mesh contexts"),
            ("enable_recoverability", False, "recovery from failed processes"),
            ("experimental_unsafe_xla_runtime_errors", False, "runtime errors"),
            ("export_ignore_forward_compatibility", False, "the export format"),
            ("serialization_version", 0, "the export format"),
            ("high_dynamic_range_gumbel", False, "random.gumbel's algorithm"),
            ("log_checkpoint_residuals", False, "logging of remat residuals"),
            ("mock_gpu_topology", "", "a mock GPU topology"),
            ("mock_num_gpu_processes", 0, "a mock GPU topology"),
            ("pjrt_client_create_options", None, "the runtime client"),
            ("sort_devices_by_process_index", True, "device order"),
            ("exec_time_optimization_effort", 0.0, "compile options (use jit's compiler_options)"),
            ("memory_fitting_effort", 0.0, "compile options (use jit's compiler_options)"),
            ("memory_fitting_level", "O2", "compile options (use jit's compiler_options)"),
            ("optimization_level", "UNKNOWN", "compile options (use jit's compiler_options)"),
            # jax 0.11's
            ("export_deserialize_expired_versions", False, "the export format"),
            ("distributed_verify_secure_credentials", False, "secure channels of jax.distributed"),
            ("mtls_cert_file", None, "mutual TLS for jax.distributed"),
            ("mtls_key_file", None, "mutual TLS for jax.distributed"),
            ("mtls_ca_file", None, "mutual TLS for jax.distributed"),
            ("mtls_peer_uri_prefix", None, "mutual TLS for jax.distributed"),
            # jax 0.12's
            ("accurate_erf_inv", False, "erf_inv's algorithm"),
        )},
    }
    # JAX's transfer guard levels (``jax.transfer_guard``); ftrans honours them for host-to-device transfers
    # (docs/differences.md, "Transfer guards").
    TRANSFER_LEVELS = ("allow", "log", "disallow", "log_explicit", "disallow_explicit")

    def __init__(self) -> None:
        self.enable_x64 = _env_flag("JAX_ENABLE_X64") or _env_flag("FTRANS_ENABLE_X64")
        self.disable_jit = _env_flag("JAX_DISABLE_JIT")
        self.debug_nans = _env_flag("JAX_DEBUG_NANS")
        self.debug_infs = _env_flag("JAX_DEBUG_INFS")
        # The on-disk compilation cache (``ftrans.lowering.disk_cache``): on by default, in the
        # user's cache directory, bounded in size (least recently used entries go first).
        self.compilation_cache_dir: str | None = _cache_dir_from_env()
        self.enable_compilation_cache = _env_flag("FTRANS_ENABLE_COMPILATION_CACHE", True)
        self.compilation_cache_max_size = _size_from_env("FTRANS_COMPILATION_CACHE_MAX_SIZE",
                                                         DEFAULT_CACHE_MAX_SIZE)
        # Names of IR passes ``jit`` skips (``ftrans.transforms.passes``); checked against the
        # registered passes when a pipeline runs, since core cannot see the pass registry.
        self.disabled_passes: tuple[str, ...] = _names_tuple(os.environ.get("FTRANS_DISABLED_PASSES", ""))
        # The IR passes ``jit`` runs: ``None`` (every registered pass) or a tuple of names
        # (``()``: none); ``disabled_passes`` is taken away from it.
        self.optimizations: tuple[str, ...] | None = _passes_option(os.environ.get("FTRANS_OPTIMIZATIONS"))
        # How many carries reverse mode of a while_loop keeps (docs/autodiff.md, "Reverse mode of while_loop").
        self.while_checkpoints: int = _slots_option(os.environ.get("FTRANS_WHILE_CHECKPOINTS", "64"))
        # The first calls of a new jit signature run on ftrans's host interpreter while XLA compiles in
        # a background thread (docs/compilation_cache.md, "Background compilation").
        self.background_compilation = _env_flag("FTRANS_BACKGROUND_COMPILATION", DEFAULT_BACKGROUND_COMPILATION)
        # Every call of a jitted function runs the one compiled program (no host-interpreted first
        # calls, whose results agree only to float tolerance).
        self.deterministic = _env_flag("FTRANS_DETERMINISTIC")
        # Log each compilation (function, argument types, the user's line) at WARNING instead of DEBUG,
        # and say why a jitted function was traced again (``ftrans.transforms.jit``), as JAX does.
        self.log_compiles = _env_flag("JAX_LOG_COMPILES")
        self.explain_cache_misses = _env_flag("JAX_EXPLAIN_CACHE_MISSES")
        # Tracing (a jit cache miss, make_jaxpr, staged control flow) / running a compiled program
        # raises instead (JAX's ``jax.no_tracing()`` / ``jax.no_execution()``).
        self.no_tracing = _env_flag("JAX_NO_TRACING")
        self.no_execution = _env_flag("JAX_NO_EXECUTION")
        # Where jit runs and device_put places by default: None (the default backend's first device),
        # a Device, or a platform name ("cpu"); resolved by ftrans.devices (JAX's ``jax.default_device``).
        self.default_device: Any = os.environ.get("JAX_DEFAULT_DEVICE") or None
        # False: ``reduce_sum`` of float16/bfloat16 over an axis longer than one raises (JAX's option).
        self.allow_f16_reductions = _env_flag("JAX_ALLOW_F16_REDUCTIONS", True)
        # Each transform level checks, when it ends, that none of its tracers outlived it
        # (``ftrans.core.leaks``; a full garbage collection per level, so off by default).
        self.check_tracer_leaks = _env_flag("JAX_CHECK_TRACER_LEAKS")
        # The precision of a matrix product or convolution given no precision (None: the platform's
        # default), e.g. "float32" or "tensorfloat32"; checked by ftrans.lax (JAX's option).
        self.default_matmul_precision: Any = os.environ.get("JAX_DEFAULT_MATMUL_PRECISION") or None
        # Implicit rank promotion in jnp's broadcasting ("allow", "warn" or "raise") and the dtype
        # promotion lattice ("standard", or "strict": only a Python scalar's kind promotes), JAX's options.
        self.numpy_rank_promotion: str = _choice_from_env("JAX_NUMPY_RANK_PROMOTION", self._known, "allow")
        self.numpy_dtype_promotion: str = _choice_from_env("JAX_NUMPY_DTYPE_PROMOTION", self._known, "standard")
        # JAX's platform list (``JAX_PLATFORMS``, e.g. "cpu"): handed to the runtime, which reads it when
        # it starts its backends (as in JAX, a change after that has no effect).
        self.platforms: str | None = os.environ.get("JAX_PLATFORMS") or None
        # How many CPU devices the CPU backend offers (-1: the runtime's default, one unless XLA_FLAGS says
        # otherwise); handed to the runtime, which refuses a change once its backends have started (JAX's).
        self.num_cpu_devices: int = int(os.environ.get("JAX_NUM_CPU_DEVICES") or -1)
        # A directory each lowered program is written to (JAX's option; "" for none), and what is written:
        # comma-separated "stablehlo" (the module), "jaxpr", "jaxpr_html", "eqn_count_pprof" (a pprof
        # profile of how many equations each line of the user's code made). ``ftrans.lowering.lower``.
        self.dump_ir_to: str = os.environ.get("JAX_DUMP_IR_TO", "")
        self.dump_ir_modes: str = _ir_modes_option(os.environ.get("JAX_DUMP_IR_MODES") or "stablehlo")
        self._accepted_values: dict[str, Any] = {n: d for n, (d, _, _) in self._accepted.items()}
        if os.environ.get("JAX_TRACEBACK_FILTERING"):  # ("off", "remove_frames", ...; see traceback_util)
            self._accepted_values["traceback_filtering"] = self._check_accepted(
                "traceback_filtering", os.environ["JAX_TRACEBACK_FILTERING"])
        # The PRNG implementation of new keys and of raw uint32[..., 4] key data ("threefry2x32", "rbg" or
        # "unsafe_rbg"; validated by ftrans.random), JAX's option.
        self.default_prng_impl: str = os.environ.get("JAX_DEFAULT_PRNG_IMPL") or "threefry2x32"
        # An integer added to every seed a key is made from (JAX's option), so one program can draw
        # different streams per process or run without changing its seeds.
        self.random_seed_offset: int = int(os.environ.get("JAX_RANDOM_SEED_OFFSET") or 0)
        # Check that no PRNG key is consumed twice (ftrans.experimental.key_reuse; JAX's option).
        self.debug_key_reuse = _env_flag("JAX_DEBUG_KEY_REUSE")
        # What jnp's checks do on a NaN result, a zero divisor, an out-of-bounds gather ("ignore", or "raise":
        # record the error for ``ftrans.error_check.raise_if_error``), JAX's options (``ftrans/numpy/error.py``).
        self.error_checking_behavior_nan: str = _choice_from_env("JAX_ERROR_CHECKING_BEHAVIOR_NAN", self._known,
                                                                 "ignore")
        self.error_checking_behavior_divide: str = _choice_from_env("JAX_ERROR_CHECKING_BEHAVIOR_DIVIDE",
                                                                    self._known, "ignore")
        self.error_checking_behavior_oob: str = _choice_from_env("JAX_ERROR_CHECKING_BEHAVIOR_OOB", self._known,
                                                                 "ignore")
        # JAX's sharding switches: mesh axes of size 1 left out of sharding types and of the manual axes a value
        # varies along (``core/sharding.py``, ``size_one_axes``); ``pvary`` inserted where a shard_map body's
        # operands vary along different manual axes (off: JAX's "requires varying manual axes to match"
        # error instead); JAX's escape hatch that lets vmap's spmd_axis_name appear in a shard_map's specs.
        self.remove_size_one_mesh_axis_from_type = _flag_from_env("JAX_REMOVE_SIZE_ONE_MESH_AXIS_FROM_TYPE", False)
        self.auto_pcast = _flag_from_env("JAX_AUTO_PCAST", True)
        self.no_collectives: frozenset = frozenset()
        self.disable_vmap_shmap_error = _flag_from_env("JAX_DISABLE_VMAP_SHMAP_ERROR", False)
        self._listeners: list = []
        # The transfer guard of each direction: None (JAX's default, "allow") or one of TRANSFER_LEVELS.
        self.transfer_guard: str | None = None
        self.transfer_guard_host_to_device: str | None = None
        self.transfer_guard_device_to_host: str | None = None
        self.transfer_guard_device_to_device: str | None = None
        # name -> check(value), registered by the layer that knows the valid values.
        self._validators: dict[str, Any] = {}

    def register_validator(self, name: str, check: Any) -> None:
        """Have ``update(name, value)`` call ``check(value)`` first (it raises on a bad value)."""
        self._validators[name] = check

    def update(self, name: str, value: Any) -> None:
        if name.startswith("jax_"):
            name = name[4:]
        if name in self._accepted:
            self._accept(name, value)
            return
        if name.startswith("transfer_guard"):
            self._update_transfer_guard(name, value)
            return
        if name not in self._known:
            from ftrans.errors import FtransConfigError

            raise FtransConfigError(
                f"unknown config option {name!r}; ftrans knows: "
                f"{', '.join(sorted([*self._known, *self._accepted]))}"
            )
        value = self._normalize(name, value)
        self.__dict__[name] = value  # the global value (a thread's context, if any, still shadows it)
        for fn in self._listeners:
            fn(name, value)

    def _normalize(self, name: str, value: Any) -> Any:
        """``value`` converted to option ``name``'s kind and checked by its validator."""
        kind = self._known[name][1]
        if kind is bool:
            value = bool(value)
        elif kind is int:
            value = _int_option(name, value)
        elif kind is tuple:
            value = _names_tuple(value)
        elif kind == "passes":
            value = _passes_option(value)
        elif kind == "size":
            value = _size_option(value)
        elif kind == "slots":
            value = _slots_option(value)
        elif kind == "ir_modes":
            value = _ir_modes_option(value)
        elif kind == "flag":
            value = _truth(f"jax_{name}", value, "config option")
        elif kind == "axis_set":
            if not isinstance(value, (set, frozenset)):
                raise TypeError(f"Expected axis name(s) as set or frozenset, got {value!r} of type {type(value)}")
            value = frozenset(value)
        elif isinstance(kind, tuple):
            value = _choice_option(name, value, kind)
        check = self._validators.get(name)
        if check is not None:
            check(value)
        return value

    def _update_transfer_guard(self, name: str, value: Any) -> None:
        """``transfer_guard`` sets all three directions; each direction takes None or a level."""
        directions = ("host_to_device", "device_to_host", "device_to_device")
        if name not in ("transfer_guard", *(f"transfer_guard_{d}" for d in directions)):
            from ftrans.errors import FtransConfigError

            raise FtransConfigError(f"unknown config option {name!r}")
        if value is not None:
            value = _choice_option(f"jax_{name}", value, self.TRANSFER_LEVELS)
        names = [f"transfer_guard_{d}" for d in directions] if name == "transfer_guard" else [name]
        if name == "transfer_guard":
            self.__dict__["transfer_guard"] = value
        for n in names:
            self.__dict__[n] = value
            for fn in self._listeners:
                fn(n, value)

    def transfer_level(self, direction: str) -> str:
        """The effective transfer guard level of ``direction`` ("host_to_device", ...): "allow" when unset."""
        return getattr(self, f"transfer_guard_{direction}") or "allow"

    def _accept(self, name: str, value: Any) -> None:
        self._accepted_values[name] = v = self._check_accepted(name, value)
        if name in ("softmax_custom_jvp", "threefry_partitionable", "enable_custom_prng",
                    "array_garbage_collection_guard", "explicit_x64_dtypes"):  # read while tracing (nn.softmax)
            # or by the garbage-collection guard of core/array.py
            for fn in self._listeners:
                fn(name, v)
        if name == "platform_name":  # JAX's older spelling of the default platform
            self.update("default_device", v or None)

    def _check_accepted(self, name: str, value: Any) -> Any:
        _default, supported, about = self._accepted[name]
        v = getattr(value, "value", value)  # an enum member, as some of JAX's option values are
        if supported is not None and v not in supported:
            from ftrans.errors import FtransValueError

            raise FtransValueError(
                f"config option jax_{name}={value!r} is not supported by ftrans (it is about {about}); ftrans runs "
                f"as JAX does with {' or '.join(map(repr, supported))}. See docs/differences.md, 'Configuration "
                "options'")
        return v

    def _scoped_value(self, name: str, value: Any) -> Any:
        """``value`` checked and converted for a context of option ``name``, as ``update`` would."""
        if name in self._accepted:
            return self._check_accepted(name, value)
        if name.startswith("transfer_guard"):
            return None if value is None else _choice_option(f"jax_{name}", value, self.TRANSFER_LEVELS)
        if name not in self._known:
            from ftrans.errors import FtransConfigError

            raise FtransConfigError(f"unknown config option {name!r}")
        return self._normalize(name, value)

    def global_value(self, name: str) -> Any:
        """Option ``name``'s global value (``config.update``'s), whatever this thread's contexts say."""
        name = name.removeprefix("jax_")
        if name in _user_globals:
            return _user_globals[name]
        d = self.__dict__
        return d[name] if name in d else d["_accepted_values"][name]

    def values_anywhere(self, name: str) -> list:
        """Every value option ``name`` has in some thread now: the global one, then each context's.

        The module-level switches that hot paths read (is any debug check on, anywhere?) are
        computed from these, so they stay conservative while a context is open in one thread."""
        with _scope_lock:
            return [self.global_value(name), *_scoped.get(name, ())]

    def scoped_here(self) -> tuple:
        """This thread's context values of the options that change a trace (``TRACE_OPTIONS``), as a
        hashable key (``()`` when it has none)."""
        return _local.key

    def read(self, name: str) -> Any:
        return getattr(self, name.removeprefix("jax_"))

    def parse_flags_with_absl(self, argv: list[str] | None = None) -> None:
        """Apply the ``--jax_<option>`` command-line flags, as JAX's ``config.parse_flags_with_absl``.

        Test files call it at import time. ``--jax_<option>=<value>``, a bare ``--jax_<option>``
        (true) and ``--nojax_<option>`` (false) set the option's global value; other arguments,
        and flags naming an option ftrans does not have, are left alone. Only the first call reads
        the arguments, as JAX's.

        Args:
            argv: the command line to read, the program's name first (default ``sys.argv``).
        """
        if self.__dict__.get("_flags_parsed"):
            return
        self.__dict__["_flags_parsed"] = True
        import sys

        for arg in (sys.argv if argv is None else argv)[1:]:
            name, eq, text = arg.partition("=")
            if name.startswith("--nojax_") and not eq:
                name, value = name[8:], False
            elif name.startswith("--jax_"):
                name = name[6:]
                value = text if eq else True
            else:
                continue
            if name not in self._known and name not in self._accepted and not name.startswith("transfer_guard"):
                continue
            if isinstance(value, str) and (name in self._known and self._known[name][1] is bool):
                low = value.lower()
                if low not in ("true", "false", "1", "0", "t", "f", "yes", "no"):
                    from ftrans.errors import FtransValueError

                    raise FtransValueError(f"flag --jax_{name}={value!r}: expected a boolean")
                value = low in ("true", "1", "t", "yes")
            self.update(name, value)

    @property
    def x64_enabled(self) -> bool:
        """Whether 64-bit types are on here (JAX's ``config.x64_enabled``: the ``enable_x64`` context's value
        in this thread, else the global one)."""
        return bool(self.enable_x64)

    def __getattr__(self, name: str) -> Any:
        # ``config.jax_enable_x64`` as JAX spells it.
        if name.startswith("jax_"):
            return getattr(self, name[4:])
        accepted = self.__dict__.get("_accepted_values")
        if accepted is not None and name in accepted:
            return accepted[name]
        raise AttributeError(name)


config = Config()


class _Local(threading.local):
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}  # option -> this thread's context value
        self.key: tuple = ()  # the values of ``TRACE_OPTIONS`` among them, a sorted tuple (jit's cache keys take it)
        self.modes: frozenset = frozenset()  # internal tracing modes on in this thread (``trace_mode``)


# Options read while tracing that change the program (x64 is in jit's keys on its own): a thread's
# context values of these are part of the jit cache keys (``config.update`` clears the caches instead).
TRACE_OPTIONS = frozenset({"default_matmul_precision", "numpy_rank_promotion", "numpy_dtype_promotion",
                           "allow_f16_reductions", "default_prng_impl", "debug_nans", "debug_infs",
                           "error_checking_behavior_nan", "error_checking_behavior_divide",
                           "error_checking_behavior_oob", "softmax_custom_jvp", "threefry_partitionable",
                           "enable_custom_prng", "remove_size_one_mesh_axis_from_type", "auto_pcast",
                           "no_collectives"})


# The global values of the contexts ``make_user_context`` made (their names: ``user_context_<n>``), which are
# part of the cache keys as ``TRACE_OPTIONS`` are.
_user_globals: dict[str, Any] = {}
_user_ids = itertools.count()


def _trace_key(values: dict) -> tuple:
    key = tuple(sorted((n, v) for n, v in values.items() if n in TRACE_OPTIONS or n in _user_globals))
    modes = _local.modes
    return key + (("trace modes", tuple(sorted(modes))),) if modes else key


@contextlib.contextmanager
def trace_mode(name: str) -> Any:
    """Turn on, in this thread and for the block, the internal tracing mode ``name``: a switch that
    changes the programs traced (``checkify`` clamps static out-of-range indices instead of refusing
    them), so it is part of the cache keys of what is traced meanwhile (``scoped_here``)."""
    prev = _local.modes
    if name in prev:
        yield
        return
    _local.modes = prev | {name}
    _local.key = _trace_key(_local.values)
    try:
        yield
    finally:
        _local.modes = prev
        _local.key = _trace_key(_local.values)


def trace_mode_on(name: str) -> bool:
    """Whether the tracing mode ``name`` is on in this thread (``trace_mode``)."""
    return name in _local.modes


_local = _Local()
_scope_lock = threading.Lock()
# option -> the values contexts hold in any thread (one entry per open context).
_scoped: dict[str, list] = {}
# Called as fn(name) when a context of option ``name`` opens or closes in some thread (not with the
# value: switches computed from it look at ``values_anywhere``).
scope_listeners: list = []


def _scoped_getter(name: str) -> Any:
    def get(self: Config) -> Any:
        v = _local.values
        if name in v:
            return v[name]
        d = self.__dict__
        return d[name] if name in d else d["_accepted_values"][name]

    def set_(self: Config, value: Any) -> None:  # a plain assignment sets the global value, as without a context
        self.__dict__[name] = value

    return property(get, set_)


@contextlib.contextmanager
def _scope(names: tuple, value: Any) -> Any:
    """Option(s) ``names`` read ``value`` in this thread for the block, as JAX's contexts are thread-local.

    While a context of an option is open anywhere, the class carries a property that looks at the
    reading thread's contexts first; otherwise the option is a plain attribute (one lookup, so
    the hot paths that read it pay nothing)."""
    mine = _local.values
    prev = [(n, mine.get(n, _local)) for n in names]
    with _scope_lock:
        for n in names:
            held = _scoped.setdefault(n, [])
            if not held:
                setattr(Config, n, _scoped_getter(n))
            held.append(value)
            mine[n] = value
        _local.key = _trace_key(mine)
    _notify(names)
    try:
        yield
    finally:
        with _scope_lock:
            for n, p in reversed(prev):
                held = _scoped[n]
                del held[next(i for i, h in enumerate(held) if h is value)]
                if p is _local:
                    del mine[n]
                else:
                    mine[n] = p
                if not held:
                    del _scoped[n]
                    delattr(Config, n)
            _local.key = _trace_key(mine)
        _notify(names)


def _notify(names: tuple) -> None:
    for n in names:
        for fn in scope_listeners:
            fn(n)


def scoped_anywhere() -> bool:
    """Whether a config context is open in any thread."""
    return bool(_scoped)


def config_context(name: str) -> Any:
    """JAX's per-option context managers (``jax.enable_x64``, ``jax.debug_nans``, ...): ``with
    ctx(value=True):`` sets option ``name`` for the block, in the calling thread only (as in JAX);
    other threads keep reading the global value ``config.update`` sets."""
    name = name.removeprefix("jax_")
    names = (name, *(f"transfer_guard_{d}" for d in ("host_to_device", "device_to_host", "device_to_device"))) \
        if name == "transfer_guard" else (name,)

    @contextlib.contextmanager
    def ctx(new_val: Any = True) -> Any:
        value = config._scoped_value(name, new_val)
        with _scope(names, value):
            yield

    ctx.__name__ = ctx.__qualname__ = name
    ctx.__doc__ = (f"Context manager for the ``jax_{name}`` config option (``with ftrans.{name}(True): ...``), "
                   "for the calling thread.")
    return ctx


class UserContext:
    """JAX's user context (``jax.make_user_context``): a value of the user's that jit's caches (and those of
    the control-flow bodies' traces) are keyed on, as a configuration option is, so a function is traced
    again when it changes. ``with ctx(v):`` sets it for the block, in the calling thread; ``set_global``
    sets the value every thread reads without a context (and has jitted functions trace again)."""

    def __init__(self, default_value: Any = None) -> None:
        self._name = f"user_context_{next(_user_ids)}"
        _user_globals[self._name] = default_value

    @property
    def value(self) -> Any:
        """The value in the calling thread: its innermost ``with`` block's, else the global one."""
        v = _local.values
        return v[self._name] if self._name in v else _user_globals[self._name]

    def get_global(self) -> Any:
        return _user_globals[self._name]

    def set_global(self, new_value: Any) -> None:
        _user_globals[self._name] = new_value
        for fn in config._listeners:  # jit's listener clears the caches: what was traced used the old value
            fn(self._name, new_value)

    def __call__(self, new_value: Any) -> Any:
        return _scope((self._name,), new_value)

    def __repr__(self) -> str:
        return f"UserContext({self._name}, global value {_user_globals[self._name]!r})"


def make_user_context(default_value: Any = None) -> UserContext:
    """JAX's ``make_user_context``: a context whose value is part of ``jit``'s cache keys. ``with ctx(1): f(x)``
    then ``with ctx(2): f(x)`` traces ``f`` twice; ``ctx.value`` reads it (e.g. inside the traced function)."""
    return UserContext(default_value)
