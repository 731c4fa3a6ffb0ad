"""The application layer: the `et-ode` command line and the jobs it runs.

`main(argv)` is the entry point (`et-ode --help` lists the commands). The jobs
(`demo_job`, `energy_video_job`, `compare_solvers_job`, `study_job`), what the first two
are asked (`EnergyVideoSettings`, `CompareSolversSettings`: frozen settings objects) and
what they share (run folders, held-out data, metadata, progress, `command_line_options`:
the model's `SolveOptions` with a command line's `--solver`, `--dt0`, ...) are public for
the figure scripts in `paper_figures/` and for users who script a job.
"""

from ._demo import demo_job
from ._jobs import (
    STUDIES,
    CompareSolversSettings,
    EnergyVideoSettings,
    compare_solvers_job,
    energy_video_job,
    study_job,
)
from ._main import build_parser, main
from ._runs import (
    encoded,
    held_out,
    job_metadata,
    place,
)
from ._study_runners import command_line_options

__all__ = [
    "STUDIES",
    "CompareSolversSettings",
    "EnergyVideoSettings",
    "build_parser",
    "command_line_options",
    "compare_solvers_job",
    "demo_job",
    "encoded",
    "energy_video_job",
    "held_out",
    "job_metadata",
    "main",
    "place",
    "study_job",
]
