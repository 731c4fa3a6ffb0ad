"""Data layer: embedded photo crops, the scene split, normalisation, image checks, TFDS."""

import json
import time

import numpy as np
import pytest

from et_ode.tasks.images import _data as data
from et_ode.tasks.images import _normalisation as normalisation
from et_ode.tasks.images import _tfds as tfds_data

try:
    import tensorflow_datasets as tfds
except ImportError:  # the optional extra `tfds`; `make test` installs it
    tfds = None

needs_tfds = pytest.mark.skipif(tfds is None, reason="needs the extra et-ode[tfds]")


# ------------------------------------------------------------------ scenes and split


def test_scenes_split_is_disjoint_and_complete():
    train, test = set(data.TRAIN_SCENES), set(data.TEST_SCENES)
    assert train and len(test) == 2
    assert not train & test
    assert train | test == set(data.SCENES)
    assert data.split_scenes("train") == data.TRAIN_SCENES
    assert data.split_scenes("test") == data.TEST_SCENES
    assert set(data.split_scenes("all")) == set(data.SCENES)
    # The stereo pair is one scene, on one side of the split.
    assert data.SCENES["motorcycle"] == ("motorcycle_left", "motorcycle_right")
    images = [name for names in data.SCENES.values() for name in names]
    assert len(images) == len(set(images)) == 10


def test_unknown_split_refused(no_runtime_types):
    # no_runtime_types: "validation" is not a `Split`, which the suite's run-time type
    # checks would refuse before split_scenes' own message, the one users get.
    with pytest.raises(ValueError, match="Unknown split"):
        data.split_scenes("validation")


def test_every_scene_loads_offline_as_rgb_uint8():
    for scene, names in data.SCENES.items():
        images = data.load_scene_images(scene)
        assert len(images) == len(names)
        for image in images:
            assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[-1] == 3
            assert min(image.shape[:2]) >= 256
    with pytest.raises(ValueError, match="Unknown scene"):
        data.load_scene_images("lena")


# ------------------------------------------------------------------------ crops


def test_photo_crops_shape_dtype_range():
    train, test = data.photo_crops("train"), data.photo_crops("test")
    n_train = sum(len(data.SCENES[s]) for s in data.TRAIN_SCENES)
    assert train.shape == (n_train * data.DEFAULT_CROPS_PER_IMAGE, 32, 32, 3)
    assert test.shape == (2 * data.DEFAULT_CROPS_PER_IMAGE, 32, 32, 3)
    assert 2000 <= len(train) <= 5000 and 300 <= len(test) <= 1200
    for crops in (train, test):
        assert crops.dtype == np.float32
        assert crops.min() >= 0.0 and crops.max() <= 1.0
        assert crops.std() > 0.1  # real photographs, not blank patches
    small = data.photo_crops("test", size=16, crops_per_image=5)
    assert small.shape == (10, 16, 16, 3)


def test_photo_crops_deterministic_per_seed():
    a = data.photo_crops("test", crops_per_image=20, seed=3)
    b = data.photo_crops("test", crops_per_image=20, seed=3)
    c = data.photo_crops("test", crops_per_image=20, seed=4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def _rows(crops):
    return {crop.tobytes() for crop in crops}


def test_all_is_train_plus_test():
    kw = dict(crops_per_image=10, seed=1)
    train, test = data.photo_crops("train", **kw), data.photo_crops("test", **kw)
    every = data.photo_crops("all", **kw)
    assert len(every) == len(train) + len(test)
    assert _rows(every) == _rows(train) | _rows(test)
    assert not _rows(train) & _rows(test)


def _found_in(crop, image):
    """Whether `crop` is an exact window of `image`."""
    s = crop.shape[0]
    top_left = image[: image.shape[0] - s + 1, : image.shape[1] - s + 1]
    for y, x in np.argwhere(np.all(top_left == crop[0, 0], axis=-1)):
        if np.array_equal(image[y : y + s, x : x + s], crop):
            return True
    return False


def test_crops_come_only_from_their_split_scenes():
    """Every crop is a window of an image of its own split and of no held-out image."""
    scaled = {
        split: [
            data._scaled_image(name, data.DEFAULT_SCALE)
            for scene in data.split_scenes(split)
            for name in data.SCENES[scene]
        ]
        for split in ("train", "test")
    }
    for split, other in (("train", "test"), ("test", "train")):
        crops = data.photo_crops(split, crops_per_image=3, seed=7)
        for crop in crops:
            assert any(_found_in(crop, image) for image in scaled[split])
            assert not any(_found_in(crop, image) for image in scaled[other])


def test_scene_crops_bad_arguments():
    with pytest.raises(ValueError, match="Unknown scene"):
        data.scene_crops(["chelsea", "lena"])
    with pytest.raises(ValueError, match="at least the crop size"):
        data.scene_crops(["chelsea"], size=64, scale=48)
    with pytest.raises(ValueError, match="crops_per_image must be a positive integer"):
        data.scene_crops(["chelsea"], crops_per_image=0)
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        data.scene_crops(["chelsea"], seed=-1)


# ---------------------------------------------------------------- normalisation


def test_normalisation_round_trip():
    crops = data.photo_crops("test", crops_per_image=50)
    norm = normalisation.ChannelNormalisation.fit(crops)
    assert len(norm.mean) == len(norm.std) == 3
    z = norm.apply(crops)
    assert z.dtype == np.float32
    np.testing.assert_allclose(z.mean(axis=(0, 1, 2)), 0.0, atol=1e-4)
    np.testing.assert_allclose(z.std(axis=(0, 1, 2)), 1.0, atol=1e-4)
    np.testing.assert_allclose(norm.invert(z), crops, atol=1e-6)

    stored = json.loads(json.dumps(norm.to_dict()))
    assert normalisation.ChannelNormalisation.from_dict(stored) == norm

    import jax.numpy as jnp

    zj = norm.apply(jnp.asarray(crops[:4]))
    np.testing.assert_allclose(np.asarray(zj), z[:4], atol=1e-6)


def test_normalisation_bad_input():
    norm = normalisation.ChannelNormalisation((0.5, 0.5, 0.5), (0.2, 0.2, 0.2))
    with pytest.raises(ValueError, match="exactly the fields 'mean' and 'std'"):
        normalisation.ChannelNormalisation.from_dict({"mean": [0, 0, 0]})
    with pytest.raises(ValueError, match="std must be positive"):
        normalisation.ChannelNormalisation.from_dict({"mean": [0, 0, 0], "std": [1, 0, 1]})
    with pytest.raises(ValueError, match="same length"):
        normalisation.ChannelNormalisation.from_dict({"mean": [0, 0, 0], "std": [1, 1]})
    with pytest.raises(ValueError, match="finite"):
        normalisation.ChannelNormalisation((0.0, np.nan, 0.0), (1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match="3 channels"):
        norm.apply(np.zeros((1, 4, 4, 1), np.float32))
    with pytest.raises(ValueError, match="floating-point"):
        norm.apply(np.zeros((1, 4, 4, 3), np.uint8))
    # A constant channel gets a floor, not a division by zero.
    flat = np.zeros((2, 4, 4, 3), np.float32)
    assert min(normalisation.ChannelNormalisation.fit(flat).std) > 0


# ------------------------------------------------------------------- check_images


def _bad(shape=(2, 8, 8, 3), dtype=np.float32, value=0.5):
    return np.full(shape, value, dtype)


def _with(x, index, value):
    x = x.copy()
    x[index] = value
    return x


@pytest.mark.parametrize(
    "images, kwargs, match",
    [
        (_bad((8, 8, 3)), {}, r"4-D batch .*images\[None\]"),
        (_bad((8, 8)), {}, "4-D batch"),
        (_bad((2, 3, 8, 8)), {}, r"channels-first .*transpose\(0, 2, 3, 1\)"),
        (_bad((2, 8, 8, 1)), {}, r"3 channels .*got 1.*np.repeat"),
        (_bad((2, 8, 8, 4)), {}, r"got 4.*alpha"),
        (_bad((2, 8, 6, 3)), {}, "square, got 8 x 6"),
        (_bad((2, 16, 16, 3)), {"size": 32}, "must be 32 x 32, got 16 x 16.*resize"),
        (_bad((0, 8, 8, 3)), {}, "empty batch"),
        (_with(_bad(), (1, 2, 3, 0), np.nan), {}, "NaN or infinite.*batch index 1"),
        (_with(_bad(), (0, 0, 0, 2), np.inf), {}, "NaN or infinite.*batch index 0"),
        (_bad(dtype=np.int16, value=300), {}, r"0\.\.255, got 300\.\.300"),
        (_bad(dtype=np.int32, value=-1), {}, r"0\.\.255"),
        (_bad(dtype=np.complex64), {}, "real numbers"),
        ("not an image", {}, "4-D batch"),
    ],
)
def test_check_images_errors(images, kwargs, match):
    with pytest.raises(ValueError, match=match):
        normalisation.check_images(images, **kwargs)


def test_check_images_accepts_good_batches():
    x = _bad((2, 32, 32, 3))
    assert normalisation.check_images(x, size=32) is x
    normalisation.check_images(_bad(dtype=np.uint8, value=255))
    normalisation.check_images(_bad(value=-3.0))  # normalised floats may leave [0, 1]
    normalisation.check_images(_bad((2, 8, 8, 1)), channels=1)
    normalisation.check_images(data.photo_crops("test", crops_per_image=2), size=32)


# ---------------------------------------------------------- TensorFlow Datasets


@needs_tfds
def test_tfds_cifar10_under_mock_data():
    with tfds.testing.mock_data(num_examples=6):
        x = tfds_data.tfds_images("cifar10", split="train")
        assert x.shape == (6, 32, 32, 3) and x.dtype == np.float32
        assert 0.0 <= x.min() and x.max() <= 1.0 and x.std() > 0.1  # noise, not images
        assert tfds_data.tfds_images("cifar10", split="test", limit=4).shape == (4, 32, 32, 3)
        # Grayscale 28 x 28 becomes three equal channels at the requested size.
        m = tfds_data.tfds_images("mnist", split="test", size=16, limit=3)
        assert m.shape == (3, 16, 16, 3)
        np.testing.assert_array_equal(m[..., 0], m[..., 2])
    normalisation.check_images(x, size=32)


if tfds is not None:

    class EtOdeTestImages(tfds.core.GeneratorBasedBuilder):
        """A tiny real dataset (40 x 40 grayscale noise), prepared without TensorFlow
        (images given as PIL images are encoded by PIL; ArrayRecord needs no TensorFlow)."""

        VERSION = tfds.core.Version("1.0.0")

        def _info(self):
            return tfds.core.DatasetInfo(
                builder=self,
                features=tfds.features.FeaturesDict(
                    {"image": tfds.features.Image(shape=(None, None, 1))}
                ),
            )

        def _split_generators(self, dl_manager):
            return {"train": self._generate_examples(5)}

        def _generate_examples(self, n):
            from PIL import Image

            for i, image in enumerate(_tiny_images(n)):
                yield i, {"image": Image.fromarray(image)}


def _tiny_images(n):
    return np.random.default_rng(0).integers(0, 256, (n, 40, 40), dtype=np.uint8)


@pytest.fixture(scope="module")
def tiny_data_dir(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("tfds")
    builder = EtOdeTestImages(data_dir=str(data_dir), file_format="array_record")
    builder.download_and_prepare(
        download_config=tfds.download.DownloadConfig(try_download_gcs=False)
    )
    return data_dir, builder.data_dir


@needs_tfds
def test_tfds_reads_a_prepared_array_record_dataset(tiny_data_dir):
    data_dir, _ = tiny_data_dir
    x = tfds_data.tfds_images("et_ode_test_images", data_dir=data_dir, size=40)
    assert x.shape == (5, 40, 40, 3) and x.dtype == np.float32
    np.testing.assert_allclose(x * 255, np.round(x * 255), atol=1e-3)
    as_uint8 = np.round(x[..., 0] * 255).astype(np.uint8)
    # ArrayRecord shards may be read in any example order: compare as sets.
    assert {im.tobytes() for im in as_uint8} == {im.tobytes() for im in _tiny_images(5)}
    np.testing.assert_array_equal(x[..., 0], x[..., 1])
    small = tfds_data.tfds_images("et_ode_test_images", data_dir=data_dir, limit=2)
    assert small.shape == (2, 32, 32, 3) and 0 <= small.min() and small.max() <= 1
    with pytest.raises(ValueError, match="Available splits: \\['train'\\]"):
        tfds_data.tfds_images("et_ode_test_images", split="validation", data_dir=data_dir)


@needs_tfds
def test_tfds_tfrecord_dataset_says_to_reprepare(tiny_data_dir, tmp_path):
    import shutil

    _, version_dir = tiny_data_dir
    copy = tmp_path / "et_ode_test_images" / "1.0.0"
    shutil.copytree(version_dir, copy)
    info = json.loads((copy / "dataset_info.json").read_text())
    info["fileFormat"] = "tfrecord"
    (copy / "dataset_info.json").write_text(json.dumps(info))
    with pytest.raises(RuntimeError, match="TFRecord format.*array_record"):
        tfds_data.tfds_images("et_ode_test_images", data_dir=tmp_path)


@needs_tfds
def test_tfds_missing_dataset_fails_fast_offline(tmp_path):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="not prepared") as info:
        tfds_data.tfds_images("cifar10", data_dir=tmp_path)
    assert time.monotonic() - start < 20
    message = str(info.value)
    assert "download_and_prepare" in message and "--data-dir" in message
    assert "file_format='array_record'" in message
    assert not any(tmp_path.iterdir())  # nothing written
    with pytest.raises(ValueError, match="no dataset 'no_such_dataset_xyz'"):
        tfds_data.tfds_images("no_such_dataset_xyz", data_dir=tmp_path)
