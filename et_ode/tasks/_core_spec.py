"""The fields of an `EnergyTransformer` core as config fields, declared once for every
model config that holds a core (`ImageModelConfig`, `GraphModelConfig`): each an
annotated type carrying its range and description (see `_schema`)."""

from typing import Annotated

from pydantic import Field

from ..vocab import Activation

TokenDim = Annotated[int, Field(ge=1, description="token dimension D")]
Heads = Annotated[int, Field(ge=1, description="attention heads H")]
HeadDim = Annotated[int, Field(ge=1, description="query/key dimension Y per head")]
Memories = Annotated[int, Field(ge=1, description="Hopfield memories K")]
Beta = Annotated[
    float | None,
    Field(gt=0, description=("attention inverse temperature (none: 1/sqrt(head_dim))")),
]
LearnBeta = Annotated[
    bool,
    Field(
        description=(
            "one learned inverse temperature per head, started at beta (the paper's appendix "
            "B.1 lists it among the learned weights)"
        )
    ),
]
HopfieldActivation = Annotated[
    Activation,
    Field(description=("the Hopfield energy's activation: relu (the paper's), softmax or power")),
]
Tau = Annotated[float, Field(gt=0, description="time constant (tau dx/dt = -dE/dg)")]
InitStd = Annotated[
    float, Field(gt=0, description=("standard deviation of the random initial weights"))
]
