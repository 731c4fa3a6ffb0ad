"""The image task: masked image completion with `MaskedImageET`.

Patches and masking (`_patches`), the model's architecture (`_spec`) and the model
(`_model`), the training config (`_config`), the images (`_data`: embedded photos and
folders; `_tfds`: TensorFlow Datasets), their normalisation and checks (`_normalisation`),
held-out evaluation and its baselines (`_evaluate`), training (`_train`) and the authors'
released ImageNet model (`_authors`). Imports the shared pieces of `et_ode.tasks`
(checkpoints, dynamics, schema, training limits, shipped models), never the graph task;
its public names are those of `et_ode.tasks`.
"""
