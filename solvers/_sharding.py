"""Data parallelism over every available device: a 1-D mesh over the batch axis.

A batched solve (`x0: [B, N, D]`) is embarrassingly parallel over B. Placing the
batch-leading arrays with a `NamedSharding` over a mesh of all devices is enough: the
jitted solve is partitioned by XLA, so the same code runs on one CPU, several forced host
devices, or several GPUs, and gives the same numbers.
"""

from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

BATCH_AXIS = "batch"


def batch_mesh(devices: Iterable[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named `"batch"` over `devices` (default: `jax.devices()`)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("batch_mesh needs at least one device.")
    return Mesh(np.asarray(devices), (BATCH_AXIS,))


def shard_batch(tree: Any, mesh: Mesh | None = None) -> tuple[Any, int]:
    """Split the leading (batch) axis of every array in `tree` over `mesh`.

    A batch that the device count does not divide is padded with copies of its last
    item, so any batch size runs on any number of devices.

    **Returns:** `(sharded_tree, batch_size)`: slice results with `[:batch_size]` to
    drop the padding.
    """
    mesh = batch_mesh() if mesh is None else mesh
    leaves = jax.tree_util.tree_leaves(tree)
    if not leaves:
        raise ValueError("shard_batch got no arrays.")
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for leaf in leaves}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(
            f"shard_batch needs arrays that share a leading batch axis; got leading sizes "
            f"{sorted(map(str, sizes))}."
        )
    batch = np.shape(leaves[0])[0]  # the one size
    n_devices = mesh.devices.size
    padded = -(-batch // n_devices) * n_devices

    def place(leaf):
        leaf = jnp.asarray(leaf)
        if padded != batch:
            extra = jnp.repeat(leaf[-1:], padded - batch, axis=0)
            leaf = jnp.concatenate([leaf, extra], axis=0)
        spec = PartitionSpec(BATCH_AXIS, *([None] * (leaf.ndim - 1)))
        return jax.device_put(leaf, NamedSharding(mesh, spec))

    return jax.tree_util.tree_map(place, tree), batch
