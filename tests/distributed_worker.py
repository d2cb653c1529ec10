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
print(json.dumps(out), flush=True)
ftrans.distributed.shutdown()
