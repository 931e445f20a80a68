"""The engine: explore a processor, replay a saved failure, run one schedule.

* :func:`explore` (:mod:`harness.engine.explorer`): the systematic and drawn search phases
  (:mod:`harness.search`), shrinking, the replay file, every distinct problem;
  :func:`explore_system`, the same loop for any :class:`SystemUnderTest`
  (:mod:`harness.engine.system`: the simulator's :class:`Simulated`, a Spark job's);
* :func:`replay` and :func:`run_once` (:mod:`harness.engine.runs`): one schedule, run and
  judged;
* :func:`rerun` (:mod:`harness.engine.reruns`): a failing schedule run again, flaky processors
  and processor errors explained;
* the values they return: :class:`Exploration`, :class:`Failure` inside
  :class:`CounterexampleFound` (:mod:`harness.engine.results`), and :class:`Replay`, the
  content of a replay file (:mod:`harness.engine.replay_file`);
* :func:`load_processor` and :func:`make_processor` (:mod:`harness.engine.loading`): a
  processor found again by name.
"""

from harness.engine.explorer import default_seed, explore, explore_system
from harness.engine.loading import load_processor, make_processor
from harness.engine.replay_file import REPLAY_VERSION, Replay
from harness.engine.reruns import rerun
from harness.engine.results import CounterexampleFound, Exploration, Failure
from harness.engine.runs import replay, run_once
from harness.engine.system import Simulated, SystemUnderTest

__all__ = [
    "REPLAY_VERSION",
    "CounterexampleFound",
    "Exploration",
    "Failure",
    "Replay",
    "Simulated",
    "SystemUnderTest",
    "default_seed",
    "explore",
    "explore_system",
    "load_processor",
    "make_processor",
    "replay",
    "rerun",
    "run_once",
]
