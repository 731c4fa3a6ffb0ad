"""Fuzzing (Hypothesis): generated inputs to every reader of files, each of which must
either work or be refused with a `ValueError` that names the problem. Never another
exception (a traceback from deep inside), never a wrong value accepted silently.

- config documents (image and graph configs): every section and field of the schema,
  unknown names, values of every TOML type including wrong ones and edge values
  (0, -1, huge integers, inf, nan, empty strings, bools, arrays, tables);
- checkpoint bytes: a valid checkpoint truncated, with bits flipped, or with bytes
  inserted, read by `read_checkpoint` and `MaskedImageET.load`.

`make test` runs `ET_ODE_FUZZ_EXAMPLES` examples per property (default 40); `make fuzz`
runs 4,000 per property (see the Makefile) and prints Hypothesis's statistics: the
inputs tried per entry point, how many were accepted and how many refused.
"""

import math
import os
import tempfile
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import et_ode
from et_ode.tasks import (
    GraphTrainConfig, TrainConfig, config_json_schema, read_checkpoint, save_checkpoint,
)

EXAMPLES = int(os.environ.get("ET_ODE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES < 1000,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# ------------------------------------------------------------------ config documents
EDGE_NUMBERS = [0, 1, -1, 2**63 - 1, -(2**63), 0.0, -0.0, 0.5, 1.5, -1e-300, 1e308,
                math.inf, -math.inf, math.nan]
SCALARS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(EDGE_NUMBERS),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["", "0.9", "1", "true", "yes", "nan", "euler", "tsit5", "projected",
                     "native", "relu", "et", "sbm", "csl", "laplacian", "photos"]),
)
TOML_VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4),
                        st.dictionaries(st.text(max_size=6), SCALARS, max_size=3))


def _valid_values(spec: dict) -> list:
    """Values the schema allows for one field (its default and enum), to mix in."""
    options = spec.get("anyOf", [spec])
    values = [spec["default"]] if spec.get("default") is not None else []
    for option in options:
        values += option.get("enum", [])
        if option.get("type") == "array":
            values += [option.get("items", {}).get("enum", [])[:2]]
    return values


def documents(kind):
    """Config documents for the config dataclass `kind`: known and unknown sections
    and fields, valid and invalid values."""
    schema = config_json_schema(kind)
    sections = {}
    for name, spec in schema["properties"].items():
        section = schema["$defs"][(spec.get("$ref") or spec["allOf"][0]["$ref"]).split("/")[-1]]
        fields = {field: st.one_of(TOML_VALUES, st.sampled_from(_valid_values(f)))
                  if _valid_values(f) else TOML_VALUES
                  for field, f in section["properties"].items()}
        fields["bogus"] = TOML_VALUES
        sections[name] = st.fixed_dictionaries({}, optional=fields)
    sections["bogus"] = st.dictionaries(st.text(max_size=4), SCALARS, max_size=2)
    return st.fixed_dictionaries({}, optional=sections) | st.sampled_from([[], 3, "x", None])


def _same_value(given, stored) -> bool:
    """Whether a stored field holds exactly the value given (an int may become the
    equal float; nothing else may change type)."""
    if isinstance(given, list):
        return isinstance(stored, tuple) and len(given) == len(stored) and all(
            _same_value(g, s) for g, s in zip(given, stored))
    if isinstance(given, bool) or isinstance(stored, bool):
        return given is stored
    if isinstance(given, int) and isinstance(stored, float):
        return float(given) == stored
    return type(given) is type(stored) and given == stored


def _check_document(kind, document):
    try:
        config = kind.from_dict(document, source="fuzz.toml")
    except ValueError as error:
        message = str(error)
        assert message.startswith("fuzz.toml: ") and "\n" not in message, message
        event("refused with a message")
        return
    event("accepted")
    assert isinstance(document, dict)
    for section, fields in document.items():
        for field, value in fields.items():
            stored = getattr(getattr(config, section), field)
            assert _same_value(value, stored), (section, field, value, stored)
            if isinstance(stored, float):
                assert math.isfinite(stored), (section, field, stored)


# no_runtime_types: a document that is not a table reaches `from_dict` on purpose (as a
# TOML file or a checkpoint header can hand it anything); the suite's run-time type
# checks would refuse it before the schema's own message, the one users get.
@FUZZ
@given(document=documents(TrainConfig))
def test_training_config_documents(document, no_runtime_types):
    _check_document(TrainConfig, document)


@FUZZ
@given(document=documents(GraphTrainConfig))
def test_graph_config_documents(document, no_runtime_types):
    _check_document(GraphTrainConfig, document)


# ------------------------------------------------------------------ checkpoint bytes
@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory):
    """A valid model checkpoint of a tiny `MaskedImageET`, as `et-ode train` writes it."""
    from et_ode.tasks._train import _header

    config = TrainConfig.from_dict({"model": {"image_size": 8, "patch": 4, "dim": 8,
                                              "n_heads": 1, "head_dim": 4,
                                              "n_memories": 8}})
    normalisation = et_ode.tasks.ChannelNormalisation.imagenet()
    model = et_ode.tasks.new_model(config, normalisation)
    path = tmp_path_factory.mktemp("fuzz") / "model.eqx"
    save_checkpoint(path, _header(config, 0, normalisation, None), model)
    return Intact(path.read_bytes())


class Intact(bytes):
    """The bytes of a valid checkpoint (a short repr in failure reports)."""

    def __repr__(self):
        return f"<{len(self)} bytes of a valid checkpoint>"


@st.composite
def damaged(draw, data: bytes):
    """`data` truncated, with bits flipped, or with bytes inserted."""
    how = draw(st.sampled_from(["truncate", "flip", "insert"]))
    if how == "truncate":
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip":
        out = bytearray(data)
        for index in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=4)):
            out[index] ^= 1 << draw(st.integers(0, 7))
        return bytes(out)
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]


@FUZZ
@given(data=st.data())
def test_damaged_checkpoints_are_refused(checkpoint_bytes, data, no_runtime_types):
    damaged_bytes = data.draw(damaged(checkpoint_bytes))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.eqx"
        path.write_bytes(damaged_bytes)
        for reader in (read_checkpoint, et_ode.tasks.MaskedImageET.load):
            if damaged_bytes == checkpoint_bytes:
                reader(path)
                continue
            with pytest.raises(ValueError, match=str(path)):
                reader(path)
        event("intact" if damaged_bytes == checkpoint_bytes else "damaged, refused")


# ------------------------------------------------------ the authors' checkpoint files
def _authors_arrays(dim=4, heads=1, head_dim=2, memories=3, patch=2, side=2) -> dict:
    """A small valid file in the authors' format (their keys and layout)."""
    import numpy as np

    rng = np.random.default_rng(0)
    p = 3 * patch * patch
    shapes = dict(Wq=(heads, head_dim, dim), Wk=(heads, head_dim, dim), Xi=(dim, memories),
                  Wenc=(p, dim), Benc=(dim,), Wdec=(dim, p), Bdec=(p,), LNORM_gamma=(),
                  LNORM_bias=(dim,), CLS_token=(dim,), MASK_token=(dim,),
                  POS_embed=(1 + side * side, dim))
    arrays = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    arrays["LNORM_gamma"] = np.asarray(1.3, np.float32)
    return arrays


AUTHORS_KEYS = sorted(_authors_arrays())
DTYPES = ["float32", "float64", "int32", "bool", "complex64", "U3", "object"]


@st.composite
def authors_files(draw):
    """A dict of arrays: the valid file with one to three changes (a key dropped, an
    array of another shape or dtype, NaN or inf inside, an extra key)."""
    import numpy as np

    arrays = _authors_arrays()
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(AUTHORS_KEYS + ["extra"]))
        change = draw(st.sampled_from(["drop", "shape", "dtype", "nonfinite"]))
        if change == "drop":
            arrays.pop(key, None)
        elif change == "shape":
            shape = tuple(draw(st.lists(st.integers(0, 6), max_size=3)))
            arrays[key] = np.ones(shape, np.float32)
        elif change == "dtype":
            dtype = draw(st.sampled_from(DTYPES))
            value = arrays.get(key, np.zeros(2))
            if value.dtype.kind not in "fiub":
                value = np.zeros(2)
            with warnings.catch_warnings():  # complex to real, NaN to int: on purpose
                warnings.simplefilter("ignore")
                arrays[key] = (np.array([{"a": 1}], dtype=object) if dtype == "object"
                               else value.astype(dtype))
        elif key in arrays and np.size(arrays[key]) and arrays[key].dtype.kind in "fiub":
            flat = np.array(arrays[key], np.float64).ravel()
            flat[draw(st.integers(0, flat.size - 1))] = draw(
                st.sampled_from([np.nan, np.inf, -np.inf]))
            arrays[key] = flat.reshape(np.shape(arrays[key]))
    return arrays


@FUZZ
@given(arrays=authors_files())
def test_authors_files_are_read_or_refused(arrays, no_runtime_types):
    import numpy as np

    from et_ode.tasks import read_authors_checkpoint

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "plaindict_ckpt.npz"
        np.savez(path, **arrays)
        try:
            config, _, _, parameters, _ = read_authors_checkpoint(path)
        except ValueError as error:
            assert str(error).startswith(str(path)) and "\n" not in str(error)
            event("refused with a message")
            return
    event("accepted")
    assert all(np.all(np.isfinite(v)) for v in parameters.values())
    assert config.model.dim == parameters["core.attention.Wq"].shape[-1]
