"""The application layer: the `et-ode` command line and the jobs it runs.

`main(argv)` is the entry point (`et-ode --help` lists the commands). The jobs
(`demo_job`, `energy_video_job`, `compare_solvers_job`, `study_job`) and what they share
(run folders, held-out data, metadata, progress) are public for the figure scripts in
`paper_figures/` and for users who script a job.
"""

from ._demo import demo_job
from ._jobs import STUDIES, compare_solvers_job, energy_video_job, study_job
from ._main import build_parser, main
from ._runs import (
    Stages,
    check_dtype,
    encoded,
    fresh_run_folder,
    held_out,
    job_metadata,
    load_model_and_config,
    output_folder,
    place,
)

__all__ = [
    "STUDIES",
    "Stages",
    "build_parser",
    "check_dtype",
    "compare_solvers_job",
    "demo_job",
    "encoded",
    "energy_video_job",
    "fresh_run_folder",
    "held_out",
    "job_metadata",
    "load_model_and_config",
    "main",
    "output_folder",
    "place",
    "study_job",
]
