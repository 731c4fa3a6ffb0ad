"""The shipped models load by name and reproduce the held-out numbers they were shipped
with (and that the README quotes), computed by the same evaluation code."""

import jax
import numpy as np
import pytest

import et_ode
from et_ode.tasks._checkpoint import read_checkpoint
from et_ode.tasks._evaluate import eval_masks, evaluate_model
from et_ode.tasks import config_from_header, held_out_split
from et_ode.tasks._zoo import SHIPPED, shipped_path


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_model_reproduces_its_numbers(name):
    path = shipped_path(name)
    header, blobs = read_checkpoint(path)
    assert len(blobs) == 1  # model only, no optimiser state
    assert path.stat().st_size < 4_000_000
    config = config_from_header(header, path)
    model = et_ode.MaskedImageET.load(name)
    assert model.dynamics == config.dynamics
    images = model.normalisation.apply(held_out_split(config))
    mse = evaluate_model(model, images, eval_masks(config, len(images)))
    assert mse == pytest.approx(header["metrics"]["eval_masked_mse"], rel=1e-4)
    # Held-out scenes only: the shipped numbers are not training numbers.
    assert header["config"]["data"]["source"] == "photos"
    assert np.isfinite(jax.tree.leaves(model)[0]).all()


def test_format_1_checkpoints_still_load(tmp_path):
    """The shipped files are format 2 (a SHA-256 of the header too). A format-1 file (the
    magic ending in 1, no header digest), as et-ode 0.1 wrote them, loads to the same
    model."""
    import hashlib
    import json
    import struct

    from et_ode.tasks._checkpoint import MAGIC, MAGIC_V1

    path = shipped_path("paper")
    data = path.read_bytes()
    assert data.startswith(MAGIC)
    header, blobs = read_checkpoint(path)
    encoded = json.dumps(dict(header, format=1), sort_keys=True).encode()
    old = tmp_path / "paper-format-1.eqx"
    old.write_bytes(MAGIC_V1 + struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))
    old_header, old_blobs = read_checkpoint(old)
    assert old_blobs == blobs and old_header["format"] == 1
    for a, b in zip(jax.tree.leaves(et_ode.MaskedImageET.load(old)),
                    jax.tree.leaves(et_ode.MaskedImageET.load("paper"))):
        np.testing.assert_array_equal(a, b)
    assert hashlib.sha256(blobs[0]).hexdigest() == header["blobs"][0]["sha256"]
