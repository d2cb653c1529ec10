"""One process of tests/test_distributed.py: joins the others, builds global arrays, runs sharded programs.

Run as ``python distributed_worker.py PORT PROCESS_ID``; prints one JSON line of results.
"""

import json
import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"

import numpy as np  # noqa: E402

import ftrans  # noqa: E402
from ftrans import lax  # noqa: E402
from ftrans.sharding import AxisType, NamedSharding, P  # noqa: E402

port, pid = int(sys.argv[1]), int(sys.argv[2])
ftrans.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid, initialization_timeout=60)
out = {"process_index": ftrans.process_index(), "process_count": ftrans.process_count(),
       "device_count": ftrans.device_count(), "local_device_count": ftrans.local_device_count()}
try:  # a second call is an error naming this line, and leaves the first one in place
    ftrans.distributed.initialize(f"localhost:{port}", num_processes=2, process_id=pid)
except ftrans.errors.DistributedInitError as e:
    out["second_initialize"] = str(e)
out["still_initialized"] = ftrans.distributed.is_initialized()
mesh = ftrans.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)  # x: one row per process
full = np.arange(8 * 8, dtype=np.float32).reshape(8, 8)
g = ftrans.make_array_from_callback((8, 8), NamedSharding(mesh, P("x", "y")), lambda idx: full[idx])
rep = NamedSharding(mesh, P())
total = ftrans.jit(lambda a: (a * 2).sum(axis=0), out_shardings=rep)(g)
out["colsum"] = np.asarray(total.addressable_shards[0].data).tolist()
local_rows = full[pid * 4:(pid + 1) * 4]
h = ftrans.make_array_from_process_local_data(NamedSharding(mesh, P("x")), local_rows)
out["local_shape"] = list(h.shape)
s = ftrans.jit(ftrans.shard_map(lambda a: lax.psum(a.sum(keepdims=True), ("x", "y")), mesh=mesh,
                                in_specs=P("x", "y"), out_specs=P()))(g)
out["psum"] = float(np.asarray(s.addressable_shards[0].data).reshape(()))
from ftrans.experimental import multihost_utils as mh  # noqa: E402

out["bcast_default"] = mh.broadcast_one_to_all({"v": np.full(3, pid + 5, np.int32)})["v"].tolist()
out["bcast_from_1"] = mh.broadcast_one_to_all(np.array([pid + 1.0], np.float32), is_source=pid == 1).tolist()
out["allgather"] = mh.process_allgather(np.array([pid, pid * 10], np.int32)).tolist()
out["allgather_tiled"] = mh.process_allgather(np.array([pid, pid * 10], np.int32), tiled=True).tolist()
out["allgather_scalar"] = mh.process_allgather(np.float32(pid)).tolist()
mh.sync_global_devices("after allgather")
mh.assert_equal(np.arange(3))
try:
    mh.assert_equal(np.array([pid]), "differs")
    out["assert_unequal"] = "passed"
except AssertionError as e:
    out["assert_unequal"] = str(e)
gl = mh.host_local_array_to_global_array(local_rows, mesh, P("x"))
out["ltg_shape"] = list(gl.shape)
out["ltg_value"] = mh.process_allgather(gl, tiled=True).tolist()
back = mh.global_array_to_host_local_array(gl, mesh, P("x"))
out["gtl_shape"] = list(back.shape)
out["gtl_value"] = np.asarray(back).tolist()
print(json.dumps(out), flush=True)
ftrans.distributed.shutdown()
