"""Convergence benchmarks in virtual time: how few rollouts the operator needs to meet its
targets, against a blind planner, a grid sweep, random search, Optuna TPE and an exhaustive
oracle, every method under one measurement protocol.

- ``scenario``: the scenario format (YAML) and its validation;
- ``space``: a scenario's allowed configurations as container configurations;
- ``protocol``: the rules every method follows (clock, window start, cost, success, the
  oracle's steady state);
- ``world``: what each run hides from the planner (matched, perturbed within published ranges,
  foreign: structural deviations), per seed, and the load it offers;
- ``measure``: the simulator's metric families sampled into series, and windows turned into
  Observations with the operator's own signal maths (``core.signals.evaluate_on_series``);
- ``virtual``: a virtual Deployment, its node, the LatencyTarget, simulated metrics and a
  virtual clock, as adapters of the reconcile loop's ports (``controller.ports``);
- ``operator_run``: the production ``controller.Reconciler`` run over them in virtual time
  (``blind``: the same loop with a planner that ignores the diagnosis);
- ``stage``: the same virtual Deployment as the searches move it;
- ``evaluate``, ``baselines``, ``oracle``: steady-state measurements (cached), the searches and
  the exhaustive search with its per-class bests;
- ``generate``: the seeded generator of the harder suite;
- ``suite`` and ``report``: a whole suite across worker processes, and its statistics.

It never touches a cluster, a network or a real clock, and it never changes the decision code
it measures: it only calls it. Optuna and matplotlib are optional (``bench`` extra).
"""
