"""A/B arms assigned by MurmurHash of a key, and shadow decisions beside the live one."""

from router_core.experiments.arms import Arm, Arms, arm_config, build_arm_router, build_arms, load_policy
from router_core.experiments.assign import Assigner, Assignment, bucket
from router_core.experiments.experiment import Experiment, build_experiment
from router_core.experiments.reload import ConfigWatcher, RestartNeeded, read_config
from router_core.experiments.shadow import ShadowJob, ShadowPolicy, compare

__all__ = [
    "Arm",
    "Arms",
    "Assigner",
    "Assignment",
    "ConfigWatcher",
    "Experiment",
    "RestartNeeded",
    "ShadowJob",
    "ShadowPolicy",
    "arm_config",
    "bucket",
    "build_arm_router",
    "build_arms",
    "build_experiment",
    "compare",
    "load_policy",
    "read_config",
]
