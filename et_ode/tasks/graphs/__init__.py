"""The graph tasks: node anomaly detection and graph classification.

The data, in NumPy only: containers and edge lists (`_containers`), generated graphs
(`_generate`), file readers (`_read`), splits and folds (`_splits`), and the argument
checks they share (`_checks`). The models' architecture (`_spec`) and the models
(`_models`), the benchmark config (`_config`), metrics (`_metrics`), training one model
(`_fit`) and the benchmark runner (`_train`). Imports the shared pieces of `et_ode.tasks`
(checkpoints, dynamics, schema, training limits, shipped models), never the image task;
its public names are those of `et_ode.tasks`.
"""
