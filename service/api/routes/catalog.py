"""``/v1/clusters`` and ``/v1/placers``: what a placement request may name."""

from __future__ import annotations

from fastapi import APIRouter

from placer import presets
from placer.placers import registry
from service import placing
from service.models import ClusterPublic, ClustersPublic, PlacerPublic, PlacersPublic

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
    """Placement methods: every registered placer, plus ``best`` and ``rl``."""
    data = []
    for name in registry.names():
        info = registry.get(name)
        data.append(PlacerPublic(name=name, description=info.description,
                                 kind="heuristic" if info.heuristic else "learned",
                                 objectives=list(info.objectives)))
    data.append(PlacerPublic(name=placing.BEST, kind="meta", objectives=["step_time"],
                             description="every heuristic; the fastest placement that fits in memory"))
    if placing.RL not in registry.names():
        data.append(PlacerPublic(name=placing.RL, kind="learned", objectives=["step_time"],
                                 description="train a placement policy in a background job "
                                             "(REINFORCE, simulator reward); answers the best so far"))
    return PlacersPublic(data=data)
