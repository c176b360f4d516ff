"""The cost models' primitives, torch-free: what planning charges a unit before it runs, in pieces that each
similarity index (`sweep.measures.indices`) and each kind of work build their own model from.

- `memory.py`: bytes. The (rows, columns) an activation takes in a layout, the float64 workspaces of the
  streamed forms (n x n Grams over chunks of features, p x p covariances over chunks of rows, whole-matrix
  copies), a pair of activation shapes (`ShapePair`) and an index's workspace on it, a unit's `Need`.
- `work.py`: float64 algebra. `Work` (multiply-adds, decompositions, elementwise reads, calls) and the rates
  a cost profile prices it at (`RATES`), the Gram and covariance counts, a unit's indices (`pair_work`) and
  direct matching's fit (`direct_match_work`).
- `pricer.py`: seconds. `Pricer`, image passes through the networks at a profile's timings, and the shared
  helpers (a dataset's split sizes, AutoAttack's budget).
"""
