"""``/v1/clusters`` and ``/v1/placers``: what a placement request may name."""

from __future__ import annotations

from fastapi import APIRouter

from placer import presets
from placer.placers import registry
from service import placing
from service.models import ClusterPublic, ClustersPublic, PlacerPublic, PlacersPublic, TrainOptions

router = APIRouter(tags=["catalog"])


@router.get("/clusters", response_model=ClustersPublic)
def list_clusters() -> ClustersPublic:
    """Cluster presets (use a name as ``cluster``, or send an inline spec)."""
    data = [
        ClusterPublic(name=c.name, description=str(c.meta.get("description", "")), spec=c.to_dict())
        for c in presets.all_presets()
    ]
    return ClustersPublic(data=data, parametric=[n for n in presets.names() if not presets.is_preset(n)])


@router.get("/placers", response_model=PlacersPublic)
def list_placers() -> PlacersPublic:
    """Placement methods: every registered placer, plus ``best`` and ``rl``, described as this API takes them."""
    data = []
    for name in registry.names():
        info = registry.get(name)
        rl = name == placing.RL
        data.append(PlacerPublic(name=name, description=_RL_DESCRIPTION if rl else info.description,
                                 kind="heuristic" if info.heuristic else "learned",
                                 objectives=list(info.objectives), options=_RL_OPTIONS if rl else info.options))
    data.append(PlacerPublic(name=placing.BEST, kind="meta", objectives=["step_time"],
                             description="every heuristic; the fastest placement that fits in memory "
                                         "(no options; 'candidates' narrows the heuristics)"))
    if placing.RL not in registry.names():
        data.append(PlacerPublic(name=placing.RL, kind="learned", objectives=["step_time"],
                                 description=_RL_DESCRIPTION, options=_RL_OPTIONS))
    return PlacersPublic(data=data)


_RL_DESCRIPTION = (
    "learned: the shipped pre-trained policy's zero-shot placement at once, then a training job fine-tuning "
    "that policy (REINFORCE against the simulator; init 'none': from scratch) whose best placement replaces it "
    "once faster; request fields budget_seconds, seed, "
    f"wait_seconds; options: {', '.join(TrainOptions.model_fields)} (as in POST /v1/jobs)")
"""Method ``rl`` as POST /v1/placements takes it. The registry's description is the command line's
(``policy=``, ``best_of=``): here the zero-shot placement is always the shipped policy's, and the options
are a training job's (`TrainOptions`, listed from the model so the two cannot drift apart)."""
_RL_OPTIONS = {name: field.description or "" for name, field in TrainOptions.model_fields.items()}
"""The training job's options (`TrainOptions`), each with its description."""
