"""Request and response schemas: one pydantic model per direction.

``*Create`` models are what a client sends, ``*Public`` what the service
answers. Graph and cluster specs mirror the library's JSON formats; the
library (`OpGraph.from_dict`, `Cluster.from_dict`) still does the semantic
checks (cycles, dangling inputs, sizes) and names the offending op.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt,
                      ValidatorFunctionWrapHandler, WrapValidator, model_validator)
from pydantic_core import PydanticCustomError

from placer.rl.config import MAX_STARTS, SEED_LIMIT, WARM_STARTS, TrainConfig, rule_of
from placer.rl.method import DEFAULT_BUDGET_SECONDS, DEFAULT_POLICY, NO_POLICY

MAX_DEVICES = 256
"""Largest inline cluster: the simulator holds device x device link matrices and op x device times."""
MAX_TOPOLOGY_NODES = 1024
"""Most switches in an inline topology (links: at most 8 per node on average)."""


# Error body of every 4xx/5xx answer.
class ErrorPublic(BaseModel):
    detail: str | list[Any] = Field(description="What was wrong, naming the field, op or id.")


# One op of an inline graph (the graph file format).
class OpSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # numbers are strict, as in a graph file (an upload): no booleans, no strings
    name: str
    op: str
    inputs: list[str] = Field(default_factory=list)
    output_shapes: list[list[StrictInt]] = Field(default_factory=list)
    output_bytes: StrictFloat = 0.0
    flops: StrictFloat = 0.0
    param_bytes: StrictFloat = 0.0
    cost: dict[str, StrictFloat] = Field(default_factory=dict)
    colocation: str | None = None
    transfer_time: StrictFloat | None = None


# An inline graph in a placement or job request (the graph file format).
class GraphSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    nodes: list[OpSpec]
    meta: dict[str, Any] = Field(default_factory=dict)

    def to_library(self) -> dict[str, Any]:
        """The dict `OpGraph.from_dict` reads."""
        return self.model_dump(exclude_none=True)


# One device of an inline cluster spec. Numbers are strict, as in a cluster file: no booleans, no strings.
class DeviceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str
    peak_flops: StrictFloat
    memory_bandwidth: StrictFloat
    memory_bytes: StrictFloat
    op_overhead: StrictFloat = 0.0
    # Optional op-cost fields (placer.cluster.Device says what each means; absent: its default).
    matrix_flops: StrictFloat | None = None
    matrix_efficiency: StrictFloat | None = None
    memory_efficiency: StrictFloat | None = None
    dispatch: StrictFloat | None = None
    fusion: StrictBool | None = None


# A link of an inline cluster spec (full duplex).
class LinkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    between: list[str] | None = Field(None, description="Two device names; absent for default_link.")
    bandwidth: StrictFloat
    latency: StrictFloat = 0.0


# A switch, link and explicit route of an inline cluster's topology (`placer.topology`).
class SwitchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: str = "switch"


class TopologyLinkSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    between: list[str] = Field(description="Two node names: devices or switches.")
    bandwidth: StrictFloat
    latency: StrictFloat = 0.0
    kind: str | None = None


class RouteSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    from_: str = Field(alias="from")
    to: str
    via: list[str] = Field(default_factory=list, description="Switch names in order.")


# An inline cluster's topology: switches and links whose directions transfers share.
class TopologySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    switches: list[SwitchSpec] = Field(default_factory=list, max_length=MAX_TOPOLOGY_NODES)
    links: list[TopologyLinkSpec] = Field(max_length=MAX_TOPOLOGY_NODES * 8)
    routes: list[RouteSpec] = Field(default_factory=list, max_length=MAX_DEVICES * (MAX_DEVICES - 1))


# An inline cluster: every field of the cluster file format (`placer/schemas/cluster.schema.json`), so the
# spec GET /v1/clusters answers for a preset can be sent back as it is.
class ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    devices: list[DeviceSpec] = Field(min_length=1, max_length=MAX_DEVICES)
    links: list[LinkSpec] = Field(default_factory=list, max_length=MAX_DEVICES * (MAX_DEVICES - 1) // 2)
    default_link: LinkSpec | None = None
    shared_threads: StrictInt | None = Field(
        None, ge=1, description="The devices share one pool of this many threads (logical CPU devices of one "
                                "TensorFlow process): at most this many ops run at once in the cluster.")
    topology: TopologySpec | None = Field(None, description="Switches and shared links (docs/topology.md), "
                                                             "instead of links and default_link.")
    meta: dict[str, Any] = Field(default_factory=dict)

    def to_library(self) -> dict[str, Any]:
        """The dict `Cluster.from_dict` reads."""
        return self.model_dump(exclude_none=True, by_alias=True)


def _preset_or_spec(value: Any, handler: ValidatorFunctionWrapHandler) -> str | ClusterSpec:
    """A string is a preset name, an object a cluster spec: the input's type picks the branch.

    Trying both branches (a plain union) reports both failures, and a bad
    spec's real error came second, after "Input should be a valid string".
    Validated as a spec alone, its errors name the spec's field
    (``cluster.devices: List should have at most 256 items``).
    """
    if isinstance(value, str):
        return handler(value)
    if not isinstance(value, (dict, ClusterSpec)):
        raise PydanticCustomError("cluster_type", "cluster must be a preset name (a string, see GET /v1/clusters) "
                                                  "or a cluster spec (an object)")
    return ClusterSpec.model_validate(value)


ClusterRef = Annotated[str | ClusterSpec, WrapValidator(_preset_or_spec)]
"""A request's ``cluster``: a preset name or an inline spec."""


# A stored graph, as listed and fetched.
class GraphPublic(BaseModel):
    id: str
    name: str
    num_ops: int
    num_edges: int
    source: str = Field(description="How it arrived: json, json+gzip, graphdef.")
    size_bytes: int = Field(description="Stored size (gzip JSON).")
    created_at: float
    graph: dict[str, Any] | None = Field(None, description="The graph file form, when include_graph=true.")


# A page of stored graphs.
class GraphsPublic(BaseModel):
    data: list[GraphPublic]
    count: int


# Ask for a placement of a stored or inline graph on a preset or inline cluster.
class PlacementCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # numbers are numbers: no booleans, no strings

    graph_id: str | None = Field(None, description="A graph uploaded with POST /v1/graphs.")
    graph: GraphSpec | None = Field(None, description="An inline graph instead of graph_id.")
    cluster: ClusterRef = Field("4gpu", description="A preset name (GET /v1/clusters) or an inline spec.")
    method: str = Field("best", description="A placer (GET /v1/placers), 'best' (every heuristic, "
                                            "fastest returned) or 'rl' (the shipped pre-trained policy's "
                                            "zero-shot placement at once, and a training job).")
    options: dict[str, Any] = Field(default_factory=dict, description="Keyword options of the method "
                                                                      "(for rl: the TrainOptions of a job).")
    objective: str = "step_time"
    baselines: StrictBool = Field(False, description="Also answer every candidate heuristic's simulated step time.")
    candidates: list[str] | None = Field(
        None, max_length=64, description="method best and baselines: only these heuristics (default: every "
                                         "heuristic that optimises the objective).")
    wait_seconds: float = Field(0.0, ge=0, allow_inf_nan=False,
                                description="method rl: how long to wait for the job (0: answer the zero-shot "
                                            "placement at once; GET follows the job).")
    budget_seconds: float = Field(DEFAULT_BUDGET_SECONDS, gt=0, le=7 * 86400, allow_inf_nan=False,
                                  description="method rl: training budget.")
    refine_seconds: float = Field(0.0, ge=0, le=60, allow_inf_nan=False,
                                  description="Then improve the answer by local search in the simulator for up to "
                                              "this long (0: not; objective step_time; rl: its zero-shot answer).")
    refine_sweeps: int | None = Field(None, ge=1, le=100_000, description="With refine_seconds: stop the "
                                      "search after this many sweeps (the same answer on any machine when "
                                      "refine_seconds does not stop it first).")
    seed: int = Field(0, ge=0, lt=SEED_LIMIT, description="method rl: random seed.")

    @model_validator(mode="after")
    def _one_graph(self) -> "PlacementCreate":
        if (self.graph_id is None) == (self.graph is None):
            raise ValueError("give exactly one of 'graph_id' and 'graph'")
        if self.refine_sweeps is not None and not self.refine_seconds:
            raise ValueError("refine_sweeps needs refine_seconds (the search's time limit)")
        return self


# A placement: the Placement contract plus where it came from.
class PlacementPublic(BaseModel):
    id: str
    graph_id: str | None = None
    graph: str
    cluster: str
    method: str
    devices: dict[str, str] = Field(description="Device of every op; empty while an rl job has no result yet.")
    step_time: float | None = Field(None, description="Simulated seconds per training step.")
    peak_memory: dict[str, float] = Field(default_factory=dict)
    oom: bool = False
    objective: str = "step_time"
    lower_bound: float | None = None
    max_load: float | None = Field(None, description="objective throughput: the busiest device's load, seconds "
                                                     "per micro-batch (a new one can start that often).")
    meta: dict[str, Any] = Field(default_factory=dict)
    baselines: dict[str, float | None] | None = Field(
        None, description="Simulated step time of every heuristic (null where one failed).")
    job_id: str | None = None
    job_state: str | None = None
    created_at: float
    cluster_spec: dict[str, Any] | None = Field(
        None, description="The cluster it was placed on, in the cluster file form (inline or preset, as it was "
                          "then); its trace is simulated on it. Left out of lists without include_devices, and "
                          "null for placements stored before it was kept.")


# A page of placements.
class PlacementsPublic(BaseModel):
    data: list[PlacementPublic]
    count: int


# Options of the trainer (``placer train`` flags); unset ones keep its defaults. Defaults and lower bounds are
# `TrainConfig`'s; the upper bounds are this service's.
class TrainOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # numbers are numbers: no booleans, no strings

    steps: int | None = Field(None, ge=1, le=10_000_000, description="Stop after this many REINFORCE steps "
                                                                     "(default: no limit; budget_seconds ends it).")
    samples: int | None = Field(None, ge=rule_of(TrainConfig, "samples").least, le=4096,
                                description=f"Placements sampled per step (default {TrainConfig.samples}).")
    groups: int | None = Field(None, ge=rule_of(TrainConfig, "groups").least, le=4096,
                               description=f"Most groups the ops are coarsened into (default {TrainConfig.groups}; "
                                           "with init, the policy's).")
    warm_start: Literal[WARM_STARTS] | None = Field(
        None, description="'heuristic': imitate the best heuristic first; 'none': do not (the default when "
                          f"fine-tuning: start from the policy's answer; with init 'none', '{TrainConfig.warm_start}'"
                          "). Either way the job never answers worse than the best heuristic.")
    warm_start_search: float | None = Field(
        None, ge=rule_of(TrainConfig, "warm_start_search").least, le=60, allow_inf_nan=False,
        description="First improve that heuristic placement by local search for this long (seconds; default "
                    f"{TrainConfig.warm_start_search:g}: not).")
    starts: int | None = Field(None, ge=1, le=MAX_STARTS, description="Race REINFORCE from this many of the fastest "
                                                             "heuristic placements, keeping the faster half each "
                                                             "round (successive halving; default 1).")
    init: Literal[DEFAULT_POLICY, NO_POLICY] | None = Field(
        None, description="'shipped' (the default): fine-tune the shipped pre-trained policy from its zero-shot "
                          "answer (with warm_start 'heuristic': imitating the best heuristic first where it beats "
                          "the policy); 'none': train from scratch, as the default does where the policy cannot "
                          "address the cluster or with starts > 1. The job never answers "
                          "worse than the zero-shot answer or the best heuristic; its result's meta.kept says "
                          "which it kept and why.")
    steer: StrictBool | None = Field(None, description="Let the policy's placements steer HEFT and CPOP op "
                                                       "by op (placer.rl.steering): method rl's zero-shot answer "
                                                       "is the fastest, and the job starts from it (the default "
                                                       "and true); false: the policy's own answer. True is for "
                                                       "fine-tuning only.")
    refine_seconds: float | None = Field(None, gt=0, le=60, allow_inf_nan=False,
                                         description="When training ends, improve its best placement by local "
                                                     "search for this long (default: no search).")
    refine_sweeps: int | None = Field(None, ge=1, le=100_000, description="With refine_seconds: at most this "
                                                                          "many sweeps of the search (default: "
                                                                          "as many as refine_seconds allows).")

    @model_validator(mode="after")
    def _consistent(self) -> "TrainOptions":
        if self.refine_sweeps is not None and self.refine_seconds is None:
            raise ValueError("refine_sweeps needs refine_seconds (the search's time limit)")
        if self.warm_start_search and (self.warm_start == "none" or (
                self.fine_tunes and self.warm_start != "heuristic")):
            raise ValueError("warm_start_search improves the heuristic warm start" + (
                ": when fine-tuning (init 'shipped', the default), set warm_start 'heuristic'" if self.fine_tunes
                else ", not warm_start 'none'"))
        if self.steer and not self.fine_tunes:
            raise ValueError("steer steers the pre-trained policy's answer: not with " + (
                "init 'none'" if self.init == NO_POLICY else "starts > 1"))
        if self.starts is not None and self.starts > 1 and (self.fine_tunes or self.warm_start == "none"):
            raise ValueError("starts races heuristic warm starts: not with " + (
                "init" if self.fine_tunes else "warm_start 'none'"))
        return self

    @property
    def fine_tunes(self) -> bool:
        """Whether the job starts from a pre-trained policy: init 'shipped', or no init and no race of
        heuristic starts (`placer.cli.train_start`'s rule)."""
        return self.init == DEFAULT_POLICY or (self.init is None and not (self.starts or 1) > 1)

    def flags(self) -> dict[str, Any]:
        """The options that are set, as ``placer train`` flags (whose default init is the shipped policy)."""
        return self.model_dump(exclude_none=True)


# Start a training job.
class JobCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # numbers are numbers: no booleans, no strings

    graph_id: str | None = None
    graph: GraphSpec | None = None
    cluster: ClusterRef = "4gpu"
    budget_seconds: float = Field(DEFAULT_BUDGET_SECONDS, gt=0, le=7 * 86400, allow_inf_nan=False)
    seed: int = Field(0, ge=0, lt=SEED_LIMIT)
    options: TrainOptions = Field(default_factory=TrainOptions)

    @model_validator(mode="after")
    def _one_graph(self) -> "JobCreate":
        if (self.graph_id is None) == (self.graph is None):
            raise ValueError("give exactly one of 'graph_id' and 'graph'")
        return self


# Progress of a training job, as its process last wrote it.
class JobProgress(BaseModel):
    step: int | None = None
    samples: int | None = None
    elapsed_seconds: float | None = None
    budget_seconds: float | None = None
    best_step_time: float | None = None
    mean_reward: float | None = None
    entropy: float | None = None


JobState = Literal["queued", "running", "cancelling", "done", "interrupted", "failed", "cancelled"]


# A training job.
class JobPublic(BaseModel):
    id: str
    graph_id: str | None
    graph_name: str
    cluster: str
    budget_seconds: float
    seed: int
    state: JobState
    error: str | None = None
    attempts: int = Field(description="Times its process was started (resumes after restarts count).")
    options: dict[str, Any] = Field(default_factory=dict, description="Trainer options it runs with.")
    created_at: float
    updated_at: float
    progress: JobProgress | None = None
    result: dict[str, Any] | None = Field(None, description="Best placement so far (Placement contract).")


# A page of jobs.
class JobsPublic(BaseModel):
    data: list[JobPublic]
    count: int


# A cluster preset.
class ClusterPublic(BaseModel):
    name: str
    description: str
    spec: dict[str, Any] = Field(description="The cluster file form.")


# The list of presets.
class ClustersPublic(BaseModel):
    data: list[ClusterPublic]
    parametric: list[str] = Field(description="Name patterns such as local:N (N from 1 to 64).")


# A placement method.
class PlacerPublic(BaseModel):
    name: str
    description: str
    kind: Literal["heuristic", "learned", "meta"]
    objectives: list[str] = Field(default_factory=list)
    options: dict[str, str] = Field(default_factory=dict, description="The keyword options it takes in a "
                                    "placement request's 'options', each with what it does and its default.")


# The list of methods.
class PlacersPublic(BaseModel):
    data: list[PlacerPublic]


# Liveness answer.
class HealthPublic(BaseModel):
    status: Literal["ok"]
    version: str
    auth: bool
    jobs_running: int
