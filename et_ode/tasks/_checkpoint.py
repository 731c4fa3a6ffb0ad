"""Checkpoints: equinox serialisation (no pickle), written atomically.

Layout (format 2): the magic bytes `ETODE-CKPT\\x00\\x02`, an 8-byte little-endian header
length, a JSON header (format version, config, step, data normalisation, versions,
metrics, and the byte length and SHA-256 of each blob), the 32-byte SHA-256 of the header
bytes, then the model blob and, for training checkpoints, the optimiser-state blob: every
byte is covered by a digest, so a damaged file is refused, never read as another config
or step. Format 1 (magic `...\\x00\\x01`, no header digest) is still read. Loading
rebuilds a skeleton from the config and fills it with `eqx.tree_deserialise_leaves`.
"""

import hashlib
import io
import json
import struct
from pathlib import Path

import equinox as eqx

from ..records import atomic_write_bytes

MAGIC = b"ETODE-CKPT\x00\x02"
MAGIC_V1 = b"ETODE-CKPT\x00\x01"  # format 1: the header without a digest
FORMAT_VERSION = 2
DIGEST = 32  # bytes of a SHA-256


def _blob(tree) -> bytes:
    buffer = io.BytesIO()
    eqx.tree_serialise_leaves(buffer, tree)
    return buffer.getvalue()


def save_checkpoint(path, header: dict, model, opt_state=None) -> None:
    """Write a checkpoint: `header` (JSON-serialisable) plus the model and, optionally,
    the optimiser state."""
    blobs = [_blob(model)] + ([_blob(opt_state)] if opt_state is not None else [])
    header = dict(
        header,
        format=FORMAT_VERSION,
        blobs=[{"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for b in blobs],
    )
    encoded = json.dumps(header, sort_keys=True).encode()
    atomic_write_bytes(
        path,
        MAGIC
        + struct.pack("<Q", len(encoded))
        + encoded
        + hashlib.sha256(encoded).digest()
        + b"".join(blobs),
    )


def read_checkpoint(path) -> tuple[dict, list[bytes]]:
    """The header and the raw blobs of a checkpoint, checked for integrity."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist.")
    data = path.read_bytes()
    version = {MAGIC: 2, MAGIC_V1: 1}.get(data[: len(MAGIC)])
    if version is None:
        raise ValueError(f"{path} is not an et-ode checkpoint (wrong magic bytes).")
    start = len(MAGIC) + 8
    try:
        (length,) = struct.unpack("<Q", data[len(MAGIC) : start])
        encoded = data[start : start + length]
        if len(encoded) != length:
            raise ValueError
        if (
            version == 2
            and hashlib.sha256(encoded).digest() != data[start + length : start + length + DIGEST]
        ):
            raise ValueError
        header = json.loads(encoded)
    except (struct.error, ValueError, UnicodeDecodeError):
        raise ValueError(f"{path}: corrupt checkpoint header (truncated or altered).") from None
    if (
        not isinstance(header, dict)
        or not isinstance(header.get("blobs"), list)
        or not all(
            isinstance(spec, dict)
            and isinstance(spec.get("bytes"), int)
            and isinstance(spec.get("sha256"), str)
            for spec in header["blobs"]
        )
    ):
        raise ValueError(f"{path}: corrupt checkpoint header.")
    if header.get("format") != version:
        raise ValueError(
            f"{path}: checkpoint format {header.get('format')} is not supported "
            f"(this et-ode reads formats 1 and {FORMAT_VERSION})."
        )
    if version == 2:
        start += DIGEST
    blobs, offset = [], start + length
    for spec in header.get("blobs", []):
        blob = data[offset : offset + spec["bytes"]]
        if len(blob) != spec["bytes"] or hashlib.sha256(blob).hexdigest() != spec["sha256"]:
            raise ValueError(f"{path}: corrupt checkpoint (truncated or altered data).")
        blobs.append(blob)
        offset += spec["bytes"]
    if not blobs:
        raise ValueError(f"{path}: checkpoint holds no model.")
    if offset != len(data):
        raise ValueError(
            f"{path}: corrupt checkpoint ({len(data) - offset} bytes after its last part)."
        )
    return header, blobs


def fill(skeleton, blob: bytes, path="checkpoint"):
    """Deserialise `blob` into a PyTree shaped like `skeleton`."""
    try:
        return eqx.tree_deserialise_leaves(io.BytesIO(blob), skeleton)
    except Exception as error:  # shape or structure mismatch
        raise ValueError(
            f"{path}: the stored arrays do not fit the model its config describes ({error})."
        ) from None
